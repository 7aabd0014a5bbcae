// Failed rows: paged, filtered by error type, with retry of all, the selected or the fixed
// rows. Whether a retry is possible comes from the API's eligibility answer, whose reason is
// shown. A failed row of a finished operation that keeps row data can be fixed in place.
import { Fragment } from "preact";
import { useState } from "preact/hooks";
import { get, post } from "../api.js";
import { useCatalog } from "../catalog.js";
import { words } from "../format.js";
import { useAction, useLoad } from "../hooks.js";
import { html } from "../html.js";
import { ERROR_TYPES, ErrorMessage, Pager, TERMINAL, TableBox } from "../widgets.js";
import { RowEditor, editableColumns } from "./fix.js";

const MAX_RETRY_ROWS = 10_000; // rows one selected-rows retry may name

/** The numbers of every fixed failed row, read page by page. */
async function fixedRowNumbers(operationId) {
  const numbers = [];
  let after;
  for (let page = 0; page < 1000; page += 1) {
    const answer = await get(`/api/bulks/${operationId}/errors`, { pageSize: 1000, after });
    numbers.push(...answer.items.filter((row) => row.fixed).map((row) => row.rowNumber));
    if (answer.nextAfter === undefined || answer.nextAfter === null) break;
    after = answer.nextAfter;
  }
  return numbers;
}

const PAGE_SIZE = 25;

function RetryOutcome({ result }) {
  if (!result) return null;
  return html`<div class="alert alert-ok" role="status">
    <p>Retry submitted ${result.rowsSubmitted} row${result.rowsSubmitted === 1 ? "" : "s"}, skipped ${result.rowsSkipped}.</p>
    ${result.skippedReasons?.length > 0 && html`<ul>${result.skippedReasons.map((r) => html`<li>${r}</li>`)}</ul>`}
  </div>`;
}

function refusal(error) {
  if (!error) return null;
  return error.body?.reason ? new Error(`Retry refused: ${error.body.reason}`) : error;
}

function FailedRow({ row, checked, onToggle, fixable, editing, onEdit }) {
  const retryable = row.stepIndex >= 0 || row.fixed === true;
  return html`<tr>
    <td>
      <input type="checkbox" checked=${checked} disabled=${!retryable} onChange=${onToggle}
        aria-label=${`Select row ${row.rowNumber}`}
        title=${retryable ? "" : "Validation failures are retried once fixed"} />
    </td>
    <td class="num">${row.rowNumber}</td>
    <td>${row.rowId ?? ""}</td>
    <td>${row.stepName ?? row.stepIndex}</td>
    <td>${words(row.errorType)}</td>
    <td class="message">${row.errorMessage}</td>
    <td class="num">${row.retryAttempt}</td>
    <td>
      ${row.fixed && html`<span class="tag">fixed</span> `}
      ${fixable &&
      html`<button type="button" aria-label=${`Fix row ${row.rowNumber}`} aria-expanded=${editing ? "true" : "false"}
        onClick=${onEdit}>Fix</button>`}
    </td>
  </tr>`;
}

/** The failed-rows section. */
export function FailedRows({ op, tick, readOnly, onChanged }) {
  const [page, setPage] = useState(1);
  const [errorType, setErrorType] = useState("");
  const [selected, setSelected] = useState(() => new Set());
  const [editing, setEditing] = useState(null); // the row number being fixed
  const [saved, setSaved] = useState({ count: 0, row: null }); // fixes saved on this page
  const [catalog] = useCatalog();
  const descriptor = catalog.data?.find((d) => d.name === op.operationName);
  const [rows] = useLoad(
    () => get(`/api/bulks/${op.id}/errors`, { page, pageSize: PAGE_SIZE, errorType }),
    [op.id, page, errorType, tick, saved.count],
  );
  const [eligibility] = useLoad(() => get(`/api/bulks/${op.id}/retry/eligibility`), [
    op.id,
    op.status,
    op.retryCount,
    op.errorCount,
    saved.count,
  ]);
  const [retry, retryState] = useAction(async (rowNumbers) => {
    let numbers = rowNumbers;
    if (numbers === "fixed") {
      numbers = (await fixedRowNumbers(op.id)).slice(0, MAX_RETRY_ROWS);
      if (numbers.length === 0) throw new Error("No failed row has been fixed.");
    }
    const result = numbers
      ? await post(`/api/bulks/${op.id}/retry/rows`, { json: { rowNumbers: numbers } })
      : await post(`/api/bulks/${op.id}/retry`);
    setSelected(new Set());
    setSaved({ count: saved.count, row: null });
    onChanged();
    return result;
  });

  const items = rows.data?.items ?? [];
  const eligible = eligibility.data?.isEligible === true;
  const reason = eligibility.data && !eligible ? eligibility.data.reason : "";
  const canRetry = eligible && !readOnly && !retryState.busy;
  const toggle = (rowNumber) => () => {
    const next = new Set(selected);
    if (next.has(rowNumber)) next.delete(rowNumber);
    else next.add(rowNumber);
    setSelected(next);
  };
  const pageRetryable = items.filter((r) => r.stepIndex >= 0 || r.fixed).map((r) => r.rowNumber);
  // Fixing needs the row's kept data, a finished operation and the right to change it.
  const canFix = TERMINAL.has(op.status) && !readOnly;
  const anyFixed = saved.count > 0 || items.some((r) => r.fixed);
  const onSaved = (row) => {
    setEditing(null);
    setSaved({ count: saved.count + 1, row: row.rowNumber });
  };
  const allOnPage = pageRetryable.length > 0 && pageRetryable.every((n) => selected.has(n));
  const togglePage = () => {
    const next = new Set(selected);
    for (const n of pageRetryable) if (allOnPage) next.delete(n);
    else next.add(n);
    setSelected(next);
  };

  return html`<section aria-labelledby="failed-title">
    <h2 id="failed-title">Failed rows</h2>
    <div class="toolbar">
      <div class="field inline">
        <label for="failed-type">Error type</label>
        <select id="failed-type" value=${errorType} onChange=${(e) => {
          setErrorType(e.currentTarget.value);
          setPage(1);
        }}>
          <option value="">All error types</option>
          ${ERROR_TYPES.map((t) => html`<option value=${t}>${words(t)}</option>`)}
        </select>
      </div>
      <button type="button" disabled=${!canRetry} onClick=${() => retry()}>Retry failed rows</button>
      <button type="button" disabled=${!canRetry || selected.size === 0} onClick=${() => retry([...selected].sort((a, b) => a - b))}>
        Retry selected rows${selected.size ? ` (${selected.size})` : ""}</button>
      <button type="button" disabled=${!canRetry || !anyFixed} onClick=${() => retry("fixed")}>Retry fixed rows</button>
    </div>
    ${saved.row !== null &&
    html`<p class="alert alert-ok" role="status">Row ${saved.row} saved. Retry it to run it with the new data.</p>`}
    ${reason && op.errorCount > 0 && html`<p class="hint" id="retry-reason">Retry is not possible now: ${reason}</p>`}
    <${RetryOutcome} result=${retryState.result} />
    <${ErrorMessage} error=${refusal(retryState.error)} />
    <${ErrorMessage} error=${rows.error} prefix="Could not load failed rows" />
    ${rows.data && items.length === 0 && html`<p class="hint">No failed rows${errorType ? ` of type ${words(errorType)}` : ""}.</p>`}
    ${items.length > 0 &&
    html`<${TableBox} label="Failed rows table">
      <table>
        <thead><tr>
          <th scope="col"><input type="checkbox" checked=${allOnPage} disabled=${pageRetryable.length === 0}
            onChange=${togglePage} aria-label="Select every retryable row on this page" /></th>
          <th scope="col">Row</th><th scope="col">Row id</th><th scope="col">Step</th>
          <th scope="col">Error type</th><th scope="col">Message</th><th scope="col">Retry attempt</th>
          <th scope="col">Fix</th>
        </tr></thead>
        <tbody>${items.map((row) => {
          const fixable = canFix && row.rowData !== undefined;
          const open = editing === row.rowNumber;
          return html`<${Fragment} key=${row.rowNumber}>
            <${FailedRow} row=${row} checked=${selected.has(row.rowNumber)} onToggle=${toggle(row.rowNumber)}
              fixable=${fixable} editing=${open} onEdit=${() => setEditing(open ? null : row.rowNumber)} />
            ${open &&
            html`<${RowEditor} op=${op} row=${row} span=${8}
              columns=${editableColumns(row, descriptor, op.columnMap)}
              onSaved=${onSaved} onClose=${() => setEditing(null)} />`}
          </${Fragment}>`;
        })}</tbody>
      </table>
    </${TableBox}>
    <${Pager} page=${rows.data} what="failed rows" onPage=${setPage} />`}
  </section>`;
}
