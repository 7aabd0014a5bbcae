// The column-mapping step: each file column gets an expected column (pre-filled with the
// suggestion) or none; problems (a required column unmapped, two columns onto one) are shown.
import { html } from "../html.js";
import { mappingProblems } from "./columns.js";

/** The mapping table. `mapping`: file column -> expected column name or "". */
export function ColumnMapping({ header, columns, mapping, onChange }) {
  const { missing, twice } = mappingProblems(mapping, columns);
  const set = (name) => (event) => onChange({ ...mapping, [name]: event.currentTarget.value });
  return html`<div class="mapping">
    <p>The file's columns do not all match this operation's columns. Choose which column each
      file column holds; the choice is sent with the file as <code>columnMap</code>.</p>
    <div class="table-box" role="region" aria-label="Column mapping" tabindex="0">
      <table>
        <thead><tr><th scope="col">File column</th><th scope="col">Operation column</th></tr></thead>
        <tbody>
          ${header.map(
            (name, index) => html`<tr key=${name}>
              <th scope="row"><code>${name || `(column ${index + 1} has no name)`}</code></th>
              <td>
                <select aria-label=${`Map file column ${name}`} value=${mapping[name] ?? ""} onChange=${set(name)}>
                  <option value="">Not used</option>
                  ${columns.map(
                    (c) => html`<option value=${c.name}>${c.name} (${c.type}${c.required ? ", required" : ""})</option>`,
                  )}
                </select>
              </td>
            </tr>`,
          )}
        </tbody>
      </table>
    </div>
    ${missing.length > 0 &&
    html`<p class="alert alert-warn" role="status">Required columns not mapped: ${missing.join(", ")}.</p>`}
    ${twice.length > 0 &&
    html`<p class="alert alert-warn" role="status">More than one file column maps to: ${twice.join(", ")}.</p>`}
  </div>`;
}
