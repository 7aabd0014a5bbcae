// The operations list: newest first, filters kept in the URL (so a filtered view is a link),
// paging, and a refresh every 2 s.
import { useEffect, useState } from "preact/hooks";
import { BulkActions } from "../actions.js";
import { get } from "../api.js";
import { useCatalog } from "../catalog.js";
import { count, time } from "../format.js";
import { POLL_MS, useLoad } from "../hooks.js";
import { html } from "../html.js";
import { Link, navigate, paths } from "../router.js";
import { ErrorMessage, Pager, ProgressBar, STATUSES, StatusText, TableBox } from "../widgets.js";

const FILTERS = ["operationName", "status", "createdBy", "from", "to"];
const PAGE_SIZES = [10, 25, 50, 100];

// Dates are picked in the browser's time zone; the API takes instants, inclusive.
function dayStart(day) {
  return day ? new Date(`${day}T00:00:00`).toISOString() : undefined;
}
function dayEnd(day) {
  return day ? new Date(`${day}T23:59:59.999`).toISOString() : undefined;
}

function apiQuery(query) {
  return {
    page: query.get("page") || undefined,
    pageSize: query.get("pageSize") || undefined,
    operationName: query.get("operationName") || undefined,
    status: query.get("status") || undefined,
    createdBy: query.get("createdBy") || undefined,
    from: dayStart(query.get("from")),
    to: dayEnd(query.get("to")),
  };
}

// A text filter keeps what is being typed in its own state: the list's refresh every 2 s
// re-renders the form, and a value bound to the address bar would wipe half-typed text.
// The address bar's value is taken over when it changes (a link, "Clear filters").
function TypedFilter({ id, committed, onCommit }) {
  const [text, setText] = useState(committed);
  useEffect(() => setText(committed), [committed]);
  return html`<input id=${id} type="search" value=${text}
    onInput=${(event) => setText(event.currentTarget.value)}
    onChange=${(event) => onCommit(event.currentTarget.value)} />`;
}

function Filters({ query, onChange, operations }) {
  const value = (name) => query.get(name) ?? "";
  const change = (name) => (event) => onChange({ [name]: event.currentTarget.value });
  return html`<form class="filters" aria-label="Filter operations" onSubmit=${(e) => e.preventDefault()}>
    <div class="field">
      <label for="filter-operation">Operation</label>
      <select id="filter-operation" value=${value("operationName")} onChange=${change("operationName")}>
        <option value="">All operations</option>
        ${(operations ?? []).map((op) => html`<option value=${op.name}>${op.name}</option>`)}
      </select>
    </div>
    <div class="field">
      <label for="filter-status">Status</label>
      <select id="filter-status" value=${value("status")} onChange=${change("status")}>
        <option value="">Any status</option>
        ${STATUSES.map((status) => html`<option value=${status}>${status}</option>`)}
      </select>
    </div>
    <div class="field">
      <label for="filter-creator">Created by</label>
      <${TypedFilter} id="filter-creator" committed=${value("createdBy")} onCommit=${(text) => onChange({ createdBy: text })} />
    </div>
    <div class="field">
      <label for="filter-from">Created from</label>
      <input id="filter-from" type="date" value=${value("from")} onChange=${change("from")} />
    </div>
    <div class="field">
      <label for="filter-to">Created to</label>
      <input id="filter-to" type="date" value=${value("to")} onChange=${change("to")} />
    </div>
    <div class="field">
      <label for="filter-size">Per page</label>
      <select id="filter-size" value=${value("pageSize") || "25"} onChange=${change("pageSize")}>
        ${PAGE_SIZES.map((size) => html`<option value=${String(size)}>${size}</option>`)}
      </select>
    </div>
    ${FILTERS.some((name) => query.get(name)) &&
    html`<button type="button" class="link-button" onClick=${() =>
      onChange(Object.fromEntries(FILTERS.map((name) => [name, ""])))}>Clear filters</button>`}
  </form>`;
}

// The list's filter as a bulk action's filter, or null when it has none.
function actionFilter(query) {
  const api = apiQuery(query);
  const filter = {};
  if (api.operationName) filter.operationName = api.operationName;
  if (api.status) filter.status = [api.status];
  if (api.createdBy) filter.createdBy = api.createdBy;
  if (api.from) filter.from = api.from;
  if (api.to) filter.to = api.to;
  return Object.keys(filter).length ? filter : null;
}

function OperationRow({ op, tenants, selected, onSelect }) {
  return html`<tr>
    <td data-label="Select" class="select">
      <input type="checkbox" checked=${selected} aria-label=${`Select operation ${op.id.slice(0, 8)}`}
        onChange=${(e) => onSelect(op.id, e.currentTarget.checked)} />
    </td>
    <td data-label="Operation">
      <${Link} href=${paths.operation(op.id)} aria-label=${`Operation ${op.operationName} ${op.id}`}>
        ${op.operationName}</${Link}>${" "}
      <span class="hint mono">${op.id.slice(0, 8)}</span>
    </td>
    <td data-label="Status"><${StatusText} status=${op.status} /></td>
    <td data-label="Progress">
      <${ProgressBar} processed=${op.processedRows} total=${op.totalRows}
        label=${`Progress of operation ${op.id.slice(0, 8)}`} />
    </td>
    <td data-label="Rows" class="num">${count(op.processedRows)} / ${count(op.totalRows)}</td>
    <td data-label="Errors" class="num">${count(op.errorCount)}</td>
    <td data-label="Priority" class="num">${op.priority ?? 0}</td>
    <td data-label="Created by">${op.createdBy}</td>
    ${tenants && html`<td data-label="Tenant">${op.tenant ?? ""}</td>`}
    <td data-label="Created at"><time datetime=${op.createdAt}>${time(op.createdAt)}</time></td>
    <td data-label="File" class="file-name">${op.fileName}</td>
  </tr>`;
}

/** The list page. */
export function ListPage({ route }) {
  const query = route.query;
  const [auto, setAuto] = useState(true);
  const [selected, setSelected] = useState(() => new Set());
  const select = (id, on) =>
    setSelected((before) => {
      const next = new Set(before);
      if (on) next.add(id);
      else next.delete(id);
      return next;
    });
  const [catalog] = useCatalog();
  const [state] = useLoad(() => get("/api/bulks", apiQuery(query)), [query.toString()], {
    every: POLL_MS,
    live: auto,
  });

  const update = (changes) => {
    // From the address bar, not this render's query: two changes in a row (type a creator,
    // press Enter, pick a date) must both count even if no render came between them.
    const next = new URLSearchParams(window.location.search);
    for (const [name, value] of Object.entries(changes)) {
      if (value) next.set(name, value);
      else next.delete(name);
    }
    if (!("page" in changes)) next.delete("page"); // a new filter starts at page 1
    navigate(paths.list(next.toString()), { replace: true });
  };
  const page = state.data;
  // A Tenant column only when an operation has one: a service without tenants looks as before.
  const tenants = Boolean(page?.items.some((op) => op.tenant));

  return html`<section>
    <div class="page-head">
      <h1 tabindex="-1">Operations</h1>
      <${Link} class="button" href=${paths.create()}>New operation</${Link}>
    </div>
    <${Filters} query=${query} onChange=${update} operations=${catalog.data} />
    <div class="toolbar">
      <label class="check">
        <input type="checkbox" checked=${auto} onChange=${(e) => setAuto(e.currentTarget.checked)} />
        Auto-refresh every 2 s
      </label>
    </div>
    <${BulkActions} selected=${selected} filter=${actionFilter(query)} onStarted=${() => setSelected(new Set())} />
    <${ErrorMessage} error=${state.error} prefix="Could not load operations" />
    ${page && page.items.length === 0 &&
    html`<p class="empty">No operations${query.toString() ? " match these filters" : " yet"}.
      <${Link} href=${paths.create()}>Create one</${Link}>.</p>`}
    ${page && page.items.length > 0 &&
    html`<${TableBox} label="Operations">
      <table class="operations stack">
        <thead><tr>
          <th scope="col"><input type="checkbox" aria-label="Select every operation on this page"
            checked=${page.items.length > 0 && page.items.every((op) => selected.has(op.id))}
            onChange=${(e) => page.items.forEach((op) => select(op.id, e.currentTarget.checked))} /></th>
          <th scope="col">Operation</th><th scope="col">Status</th><th scope="col">Progress</th>
          <th scope="col">Rows</th><th scope="col">Errors</th><th scope="col">Priority</th>
          <th scope="col">Created by</th>
          ${tenants && html`<th scope="col">Tenant</th>`}
          <th scope="col">Created at</th><th scope="col">File</th>
        </tr></thead>
        <tbody>${page.items.map((op) => html`<${OperationRow} key=${op.id} op=${op} tenants=${tenants}
          selected=${selected.has(op.id)} onSelect=${select} />`)}</tbody>
      </table>
    </${TableBox}>
    <${Pager} page=${page} what="operations" onPage=${(n) => update({ page: String(n) })} />`}
  </section>`;
}
