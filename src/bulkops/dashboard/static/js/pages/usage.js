// Who used how much (GET /api/usage): each tenant's operations, rows and stored bytes by
// day over the last 30 days. The API answers operators only (operate access); a caller
// with a tenant sees its own tenant's use.
import { get } from "../api.js";
import { bytes, count } from "../format.js";
import { useLoad } from "../hooks.js";
import { html } from "../html.js";
import { ErrorMessage, TableBox } from "../widgets.js";

/** The usage page. */
export function UsagePage() {
  const [state] = useLoad(() => get("/api/usage"), []);
  const usage = state.data;
  const refused = state.error?.status === 403;
  return html`<section>
    <h1 tabindex="-1">Usage</h1>
    <p>Operations created, rows submitted and processed, and bytes stored, per tenant and day
      (UTC, by the day operations were created) over the last ${usage?.days ?? 30} days.</p>
    ${refused
      ? html`<p class="alert alert-info" role="status">Usage needs an access token with operate rights.</p>`
      : html`<${ErrorMessage} error=${state.error} prefix="Could not load usage" />`}
    ${usage && usage.items.length === 0 && html`<p class="hint" role="status">No operations in the last ${usage.days} days.</p>`}
    ${usage && usage.items.length > 0 &&
    html`<${TableBox} label="Usage by tenant and day">
      <table>
        <thead><tr>
          <th scope="col">Day</th><th scope="col">Tenant</th><th scope="col" class="num">Operations</th>
          <th scope="col" class="num">Rows submitted</th><th scope="col" class="num">Rows processed</th>
          <th scope="col" class="num">Stored</th>
        </tr></thead>
        <tbody>
          ${usage.items.map(
            (item) => html`<tr key=${`${item.day}:${item.tenant ?? ""}`}>
              <td>${item.day}</td>
              <td>${item.tenant ?? html`<span class="hint">none</span>`}</td>
              <td class="num">${count(item.operationsCreated)}</td>
              <td class="num">${count(item.rowsSubmitted)}</td>
              <td class="num">${count(item.rowsProcessed)}</td>
              <td class="num">${bytes(item.bytesStored)}</td>
            </tr>`,
          )}
        </tbody>
      </table>
    </${TableBox}>`}
  </section>`;
}
