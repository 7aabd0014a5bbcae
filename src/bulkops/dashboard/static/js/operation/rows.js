// Per-row pipeline progress: every row with the state, attempts and error of each step.
import { useState } from "preact/hooks";
import { get } from "../api.js";
import { words } from "../format.js";
import { useLoad } from "../hooks.js";
import { html } from "../html.js";
import { ErrorMessage, Pager, ROW_STATES, TableBox } from "../widgets.js";

const PAGE_SIZE = 25;

function Steps({ steps }) {
  return html`<ol class="steps">
    ${steps.map(
      (step) => html`<li key=${step.index} class=${`step-${step.state.toLowerCase()}`}>
        <span class="step-name">${step.name}</span>: ${words(step.state)}${step.attempts > 0
          ? `, ${step.attempts} attempt${step.attempts === 1 ? "" : "s"}`
          : ""}${step.errorType ? html` <span class="step-error">(${words(step.errorType)}: ${step.errorMessage})</span>` : ""}
      </li>`,
    )}
  </ol>`;
}

/** The rows section. */
export function RowProgress({ op, tick }) {
  const [page, setPage] = useState(1);
  const [state, setState] = useState("");
  const [rows] = useLoad(
    () => get(`/api/bulks/${op.id}/rows`, { page, pageSize: PAGE_SIZE, state }),
    [op.id, page, state, tick],
  );
  const items = rows.data?.items ?? [];
  return html`<section aria-labelledby="rows-title">
    <h2 id="rows-title">Rows and steps</h2>
    <div class="toolbar">
      <div class="field inline">
        <label for="rows-state">Row state</label>
        <select id="rows-state" value=${state} onChange=${(e) => {
          setState(e.currentTarget.value);
          setPage(1);
        }}>
          <option value="">All states</option>
          ${ROW_STATES.map((s) => html`<option value=${s}>${words(s)}</option>`)}
        </select>
      </div>
    </div>
    <${ErrorMessage} error=${rows.error} prefix="Could not load rows" />
    ${rows.data && items.length === 0 && html`<p class="hint">No rows${state ? ` in state ${words(state)}` : " yet"}.</p>`}
    ${items.length > 0 &&
    html`<${TableBox} label="Rows and steps table">
      <table>
        <thead><tr>
          <th scope="col">Row</th><th scope="col">Row id</th><th scope="col">State</th>
          <th scope="col">Current step</th><th scope="col">Steps done</th><th scope="col">Retry attempt</th>
          <th scope="col">Steps</th>
        </tr></thead>
        <tbody>${items.map(
          (row) => html`<tr key=${row.rowNumber}>
            <td class="num">${row.rowNumber}</td>
            <td>${row.rowId ?? ""}</td>
            <td>${words(row.state)}</td>
            <td>${row.currentStep ?? ""}</td>
            <td class="num">${row.completedSteps} / ${row.totalSteps}</td>
            <td class="num">${row.retryAttempt}</td>
            <td><${Steps} steps=${row.steps} /></td>
          </tr>`,
        )}</tbody>
      </table>
    </${TableBox}>
    <${Pager} page=${rows.data} what="rows" onPage=${setPage} />`}
  </section>`;
}
