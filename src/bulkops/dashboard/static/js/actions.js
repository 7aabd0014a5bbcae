// Bulk actions from the operations list: retry or cancel the selected operations (or all
// that match the filter), with the preview's count shown before confirming, then the
// action's progress until it ends.
import { useEffect, useRef, useState } from "preact/hooks";
import { get, post } from "./api.js";
import { count } from "./format.js";
import { POLL_MS, useAction, useLoad } from "./hooks.js";
import { html } from "./html.js";
import { ErrorMessage } from "./widgets.js";

const VERBS = { retry: "Retry", cancel: "Cancel" };

function Progress({ id }) {
  const [state] = useLoad(() => get(`/api/actions/${id}`), [id], { every: POLL_MS, live: true });
  const action = state.data;
  if (!action) return html`<${ErrorMessage} error=${state.error} prefix="Could not load the action" />`;
  return html`<div class="action-progress" role="status" aria-label="Bulk action progress">
    <p>${`${VERBS[action.action] ?? action.action} of ${count(action.matched)} operations: ${action.status}, ` +
    `${count(action.done)} done, ${count(action.skipped)} skipped, ${count(action.failed)} failed`}</p>
    ${action.items?.length > 0 &&
    html`<ul class="action-items">${action.items.map(
      (item) => html`<li key=${item.operationId}><span class="mono">${item.operationId.slice(0, 8)}</span>
        ${" "}${item.outcome}: ${item.reason}</li>`,
    )}</ul>`}
    ${action.status === "Running" &&
    html`<button type="button" onClick=${() => post(`/api/actions/${action.id}/cancel`).catch(() => {})}>
      Stop this action</button>`}
  </div>`;
}

/**
 * The bulk-action bar. `selected`: the ids chosen on the page; `filter`: the list's
 * filter in the API's names (null when there is none: "all matching" needs one).
 */
export function BulkActions({ selected, filter, onStarted }) {
  const [everyMatch, setEveryMatch] = useState(false);
  const [asking, setAsking] = useState(null); // {action, matched} while confirming
  const [started, setStarted] = useState(null);
  const yes = useRef(null);
  const target = () => (everyMatch && filter ? filter : { ids: [...selected] });
  const [preview, previewState] = useAction(async (action) => {
    const found = await post("/api/actions", { json: { action, filter: target(), preview: true } });
    setAsking({ action, matched: found.matched });
    return found;
  });
  const [start, startState] = useAction(async () => {
    const action = await post("/api/actions", { json: { action: asking.action, filter: target() } });
    setAsking(null);
    setStarted(action.id);
    onStarted?.();
    return action;
  });
  useEffect(() => {
    if (asking) yes.current?.focus();
  }, [asking]);
  useEffect(() => {
    if (!filter) setEveryMatch(false);
  }, [filter]);
  const chosen = everyMatch ? "all matching" : `${selected.size} selected`;
  const none = !everyMatch && selected.size === 0;
  return html`<div class="bulk-actions" role="group" aria-label="Bulk actions">
    <span class="hint">${chosen}</span>
    ${filter &&
    html`<label class="check">
      <input type="checkbox" checked=${everyMatch} onChange=${(e) => setEveryMatch(e.currentTarget.checked)} />
      All operations matching the filter</label>`}
    <button type="button" disabled=${none || previewState.busy} onClick=${() => preview("retry")}>Retry…</button>
    <button type="button" class="danger" disabled=${none || previewState.busy} onClick=${() => preview("cancel")}>
      Cancel…</button>
    ${asking &&
    html`<div role="group" aria-label="Confirm bulk action" class="confirm">
      <p>${VERBS[asking.action]} ${count(asking.matched)} ${asking.matched === 1 ? "operation" : "operations"}?
        Those that cannot be ${asking.action === "retry" ? "retried" : "cancelled"} are skipped, each with the reason.</p>
      <button type="button" class=${asking.action === "cancel" ? "danger" : "primary"} ref=${yes}
        disabled=${startState.busy || asking.matched === 0} onClick=${() => start()}>
        Yes, ${asking.action} ${count(asking.matched)} ${asking.matched === 1 ? "operation" : "operations"}</button>
      <button type="button" onClick=${() => setAsking(null)}>Not now</button>
    </div>`}
    <${ErrorMessage} error=${previewState.error ?? startState.error} prefix="The bulk action was refused" />
    ${started && html`<${Progress} id=${started} />`}
  </div>`;
}
