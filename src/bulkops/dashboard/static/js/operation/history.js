// Retry history: the error each retried row had before a retry reset it.
import { useState } from "preact/hooks";
import { get } from "../api.js";
import { time, words } from "../format.js";
import { useLoad } from "../hooks.js";
import { html } from "../html.js";
import { ErrorMessage, Pager, TableBox } from "../widgets.js";

/** The retry-history section. */
export function RetryHistory({ op }) {
  const [page, setPage] = useState(1);
  const [history] = useLoad(
    () => get(`/api/bulks/${op.id}/retry/history`, { page, pageSize: 25 }),
    [op.id, page, op.retryCount],
  );
  const items = history.data?.items ?? [];
  return html`<section aria-labelledby="history-title">
    <h2 id="history-title">Retry history</h2>
    <${ErrorMessage} error=${history.error} prefix="Could not load the retry history" />
    ${history.data && items.length === 0 && html`<p class="hint">No row has been retried.</p>`}
    ${items.length > 0 &&
    html`<${TableBox} label="Retry history table">
      <table>
        <thead><tr>
          <th scope="col">Row</th><th scope="col">Attempt</th><th scope="col">Step</th>
          <th scope="col">Error type</th><th scope="col">Message</th><th scope="col">Failed at</th>
        </tr></thead>
        <tbody>${items.map(
          (entry) => html`<tr key=${`${entry.rowNumber}-${entry.attempt}`}>
            <td class="num">${entry.rowNumber}</td>
            <td class="num">${entry.attempt}</td>
            <td>${entry.stepName ?? entry.stepIndex}</td>
            <td>${words(entry.errorType)}</td>
            <td class="message">${entry.errorMessage}</td>
            <td>${time(entry.failedAt)}</td>
          </tr>`,
        )}</tbody>
      </table>
    </${TableBox}>
    <${Pager} page=${history.data} what="retried rows" onPage=${setPage} />`}
  </section>`;
}
