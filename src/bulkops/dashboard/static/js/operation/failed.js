// Failed rows: paged, filtered by error type, with retry of all or the selected rows. Whether
// a retry is possible comes from the API's eligibility answer, whose reason is shown.
import { useState } from "preact/hooks";
import { get, post } from "../api.js";
import { words } from "../format.js";
import { useAction, useLoad } from "../hooks.js";
import { html } from "../html.js";
import { ERROR_TYPES, ErrorMessage, Pager, TableBox } from "../widgets.js";

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

function FailedRow({ row, checked, onToggle }) {
  const retryable = row.stepIndex >= 0;
  return html`<tr>
    <td>
      <input type="checkbox" checked=${checked} disabled=${!retryable} onChange=${onToggle}
        aria-label=${`Select row ${row.rowNumber}`}
        title=${retryable ? "" : "Validation failures are never retried"} />
    </td>
    <td class="num">${row.rowNumber}</td>
    <td>${row.rowId ?? ""}</td>
    <td>${row.stepName ?? row.stepIndex}</td>
    <td>${words(row.errorType)}</td>
    <td class="message">${row.errorMessage}</td>
    <td class="num">${row.retryAttempt}</td>
  </tr>`;
}

/** The failed-rows section. */
export function FailedRows({ op, tick, readOnly, onChanged }) {
  const [page, setPage] = useState(1);
  const [errorType, setErrorType] = useState("");
  const [selected, setSelected] = useState(() => new Set());
  const [rows] = useLoad(
    () => get(`/api/bulks/${op.id}/errors`, { page, pageSize: PAGE_SIZE, errorType }),
    [op.id, page, errorType, tick],
  );
  const [eligibility] = useLoad(() => get(`/api/bulks/${op.id}/retry/eligibility`), [
    op.id,
    op.status,
    op.retryCount,
    op.errorCount,
  ]);
  const [retry, retryState] = useAction(async (rowNumbers) => {
    const result = rowNumbers
      ? await post(`/api/bulks/${op.id}/retry/rows`, { json: { rowNumbers } })
      : await post(`/api/bulks/${op.id}/retry`);
    setSelected(new Set());
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
  const pageRetryable = items.filter((r) => r.stepIndex >= 0).map((r) => r.rowNumber);
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
    </div>
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
        </tr></thead>
        <tbody>${items.map(
          (row) => html`<${FailedRow} key=${row.rowNumber} row=${row} checked=${selected.has(row.rowNumber)}
            onToggle=${toggle(row.rowNumber)} />`,
        )}</tbody>
      </table>
    </${TableBox}>
    <${Pager} page=${rows.data} what="failed rows" onPage=${setPage} />`}
  </section>`;
}
