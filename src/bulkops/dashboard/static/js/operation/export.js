// Export: a report of every row, or the original rows with their outcome (to fix and upload
// again), as CSV, JSON or JSON Lines.
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { DownloadButton } from "../widgets.js";

/** The export section. */
export function Export({ op }) {
  const [mode, setMode] = useState("report");
  const [format, setFormat] = useState("csv");
  const [failedOnly, setFailedOnly] = useState(false);
  const query = { mode, format, state: failedOnly ? "Failed" : undefined };
  return html`<section aria-labelledby="export-title">
    <h2 id="export-title">Export</h2>
    <div class="toolbar">
      <div class="field inline">
        <label for="export-mode">Export mode</label>
        <select id="export-mode" value=${mode} onChange=${(e) => setMode(e.currentTarget.value)}>
          <option value="report">Report: every row's outcome</option>
          <option value="data">Data: original columns and outcome</option>
        </select>
      </div>
      <div class="field inline">
        <label for="export-format">Export format</label>
        <select id="export-format" value=${format} onChange=${(e) => setFormat(e.currentTarget.value)}>
          <option value="csv">CSV</option>
          <option value="json">JSON</option>
          <option value="jsonl">JSON Lines</option>
        </select>
      </div>
      <label class="check">
        <input type="checkbox" checked=${failedOnly} onChange=${(e) => setFailedOnly(e.currentTarget.checked)} />
        Failed rows only
      </label>
      <${DownloadButton} path=${`/api/bulks/${op.id}/export`} query=${query} label="Download export">
        Download export</${DownloadButton}>
    </div>
    <p class="hint">Data mode needs an operation that keeps row data; fix the failed rows in the
      file and upload it again as a new operation.</p>
  </section>`;
}
