// Webhook deliveries of an operation (GET /api/bulks/{id}/notifications). Services without
// notifications answer 404 there, and then the section is not shown.
import { request } from "../api.js";
import { time } from "../format.js";
import { useLoad } from "../hooks.js";
import { html } from "../html.js";
import { ErrorMessage, TableBox } from "../widgets.js";

const TIME_FIELDS = /At$/;

function cell(key, value) {
  if (value === null || value === undefined) return "";
  if (TIME_FIELDS.test(key) && typeof value === "string") return time(value);
  if (Array.isArray(value)) return value.join(", ");
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

// Set once a 404 showed that this service has no deliveries route, so it is asked only once.
let routeMissing = false;

async function loadDeliveries(id) {
  if (routeMissing) return null;
  const answer = await request("GET", `/api/bulks/${id}/notifications`, { accept: [404] });
  if (answer.status === 404) {
    routeMissing = true; // the operation itself exists: the page has just loaded it
    return null;
  }
  return Array.isArray(answer.body) ? answer.body : (answer.body?.items ?? []);
}

/** The deliveries section, or nothing when the service has no such route. */
export function Deliveries({ op, tick }) {
  const [state] = useLoad(() => loadDeliveries(op.id), [op.id, tick]);
  if (state.data === null || (state.data === undefined && !state.error)) return null;
  const items = state.data ?? [];
  const columns = [...new Set(items.flatMap((item) => Object.keys(item)))];
  return html`<section aria-labelledby="deliveries-title">
    <h2 id="deliveries-title">Notification deliveries</h2>
    <${ErrorMessage} error=${state.error} prefix="Could not load deliveries" />
    ${state.data && items.length === 0 && html`<p class="hint">No notification has been sent.</p>`}
    ${items.length > 0 &&
    html`<${TableBox} label="Notification deliveries table">
      <table>
        <thead><tr>${columns.map((c) => html`<th scope="col">${c}</th>`)}</tr></thead>
        <tbody>${items.map(
          (item, i) => html`<tr key=${i}>${columns.map((c) => html`<td>${cell(c, item[c])}</td>`)}</tr>`,
        )}</tbody>
      </table>
    </${TableBox}>`}
  </section>`;
}
