// One operation's page (/dashboard/bulks/{id}): polls the operation every 2 s until it
// reaches a terminal status (and again after any action), and each section reloads with it.
import { useEffect, useState } from "preact/hooks";
import { useAccess } from "../access.js";
import { get } from "../api.js";
import { useCatalog } from "../catalog.js";
import { EventTable, useFeed } from "../feed.js";
import { POLL_MS, useLoad } from "../hooks.js";
import { html } from "../html.js";
import { Export } from "../operation/export.js";
import { FailedRows } from "../operation/failed.js";
import { RetryHistory } from "../operation/history.js";
import { Deliveries } from "../operation/notifications.js";
import { RowProgress } from "../operation/rows.js";
import { WaitingRows } from "../operation/signals.js";
import { Summary } from "../operation/summary.js";
import { Link, paths } from "../router.js";
import { ErrorMessage, ReadOnlyNote, TERMINAL } from "../widgets.js";

function OperationEvents({ op, tick }) {
  const feed = useFeed(`/api/bulks/${op.id}/events`, { tick, limit: 200 });
  return html`<section aria-labelledby="events-title">
    <h2 id="events-title">Events</h2>
    <${ErrorMessage} error=${feed.error} prefix="Could not load events" />
    ${feed.started && feed.events.length === 0 && html`<p class="hint">No events yet.</p>`}
    ${feed.events.length > 0 && html`<${EventTable} events=${feed.events} label="Events of this operation" />`}
  </section>`;
}

const SECTIONS = [
  ["waiting-title", "Waiting"],
  ["failed-title", "Failed rows"],
  ["rows-title", "Rows"],
  ["export-title", "Export"],
  ["history-title", "Retry history"],
  ["events-title", "Events"],
];

/** The operation page. */
export function OperationPage({ route }) {
  const id = route.id;
  const access = useAccess();
  const [catalog] = useCatalog();
  const [live, setLive] = useState(true);
  const [state, reload] = useLoad(() => get(`/api/bulks/${encodeURIComponent(id)}`), [id], {
    every: POLL_MS,
    live,
  });
  const op = state.data;
  const tick = state.loads; // every fresh answer refreshes the sections

  useEffect(() => {
    if (op && TERMINAL.has(op.status)) setLive(false); // the API's advice: stop when terminal
  }, [op]);

  // After a retry, cancel or signal: look again now, and keep polling until terminal again.
  const changed = () => (live ? reload() : setLive(true));

  // One heading element whatever the state, so the focus the shell gives it stays there.
  const missing = state.error?.status === 404 && !op;
  const head = html`<div class="page-head">
    <h1 tabindex="-1">${op ? op.operationName : missing ? "Operation not found" : "Operation"}</h1>
    <span class="mono hint">${op ? op.id : ""}</span>
  </div>`;
  if (!op) {
    return html`<section class="operation">
      ${head}
      ${state.error
        ? html`<${ErrorMessage} error=${state.error} />
            <p><${Link} href=${paths.list()}>Back to all operations</${Link}></p>`
        : html`<p role="status">Loading…</p>`}
    </section>`;
  }

  const descriptor = catalog.data?.find((d) => d.name === op.operationName);
  const stepBased = descriptor ? descriptor.isStepBased : true;
  const readOnly = access.readOnly;
  return html`<section class="operation">
    ${head}
    <nav class="on-page" aria-label="Sections of this page">
      ${SECTIONS.filter(([target]) => stepBased || target !== "waiting-title").map(
        ([target, text]) => html`<a href=${`#${target}`}>${text}</a>`,
      )}
    </nav>
    <${ErrorMessage} error=${state.error} prefix="Could not refresh" />
    <${ReadOnlyNote} reason=${readOnly} />
    <${Summary} op=${op} readOnly=${readOnly} onChanged=${changed} />
    ${stepBased && html`<${WaitingRows} op=${op} tick=${tick} readOnly=${readOnly} onChanged=${changed} />`}
    <${FailedRows} op=${op} tick=${tick} readOnly=${readOnly} onChanged=${changed} />
    <${RowProgress} op=${op} tick=${tick} />
    <${Export} op=${op} />
    <${RetryHistory} op=${op} />
    <${OperationEvents} op=${op} tick=${tick} />
    <${Deliveries} op=${op} tick=${tick} />
  </section>`;
}
