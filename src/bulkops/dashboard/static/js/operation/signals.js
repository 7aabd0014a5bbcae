// Rows waiting for a signal, grouped by their signal key. A signal completes the row that
// started waiting first under that key (FIFO), so buttons act on keys, and the answer says
// which row it completed.
import { useState } from "preact/hooks";
import { get, post } from "../api.js";
import { useAction, useLoad } from "../hooks.js";
import { html } from "../html.js";
import { ErrorMessage } from "../widgets.js";

const WAITING_PAGE = 1000;

/** The user part of a scoped key `{operationId}:{userKey}:{rowNumber}`. */
export function userKey(signalKey, operationId, rowNumber) {
  let key = signalKey;
  if (key.startsWith(`${operationId}:`)) key = key.slice(operationId.length + 1);
  const suffix = `:${rowNumber}`;
  return key.endsWith(suffix) ? key.slice(0, -suffix.length) : key;
}

function groups(rows, operationId) {
  const byKey = new Map();
  for (const row of rows) {
    if (!row.signalKey) continue;
    const key = userKey(row.signalKey, operationId, row.rowNumber);
    if (!byKey.has(key)) byKey.set(key, []);
    byKey.get(key).push(row);
  }
  return [...byKey.entries()];
}

function KeyControls({ signalKey, index, rows, disabled, onSignal }) {
  const [message, setMessage] = useState("");
  const id = `signal-failure-${index}`;
  const steps = [...new Set(rows.map((r) => r.currentStep).filter(Boolean))];
  const fail = async () => {
    if (await onSignal(signalKey, message.trim())) setMessage("");
  };
  return html`<li class="signal">
    <p><strong><code>${signalKey}</code></strong>:${" "}
      ${rows.length > 1 ? "rows" : "row"} ${rows.map((r) => r.rowNumber).join(", ")} waiting${steps.length ? ` at ${steps.join(", ")}` : ""}.</p>
    <div class="signal-actions">
      <button type="button" disabled=${disabled} onClick=${() => onSignal(signalKey, null)}
        aria-label=${`Signal success for ${signalKey}`}>Signal success</button>
      <label for=${id}>Failure message for ${signalKey}</label>
      <input id=${id} value=${message} maxLength="2000" onInput=${(e) => setMessage(e.currentTarget.value)} />
      <button type="button" class="danger" disabled=${disabled || !message.trim()} onClick=${fail}
        aria-label=${`Signal failure for ${signalKey}`}>Signal failure</button>
    </div>
  </li>`;
}

function SignalOutcome({ result }) {
  if (!result) return null;
  const step = result.stepName ? ` at ${result.stepName}` : "";
  return html`<p class="alert alert-ok" role="status">
    Row ${result.rowNumber} ${result.failed ? "failed" : "completed"}${step}.</p>`;
}

/** The waiting rows of a step-based operation, with signal buttons. */
export function WaitingRows({ op, tick, readOnly, onChanged }) {
  const [waiting] = useLoad(
    () => get(`/api/bulks/${op.id}/rows`, { state: "WaitingForCompletion", pageSize: WAITING_PAGE }),
    [op.id, tick],
  );
  // errorMessage null: success; a string: failure with that message.
  const [signal, state] = useAction(async (key, errorMessage) => {
    const path = `/api/bulks/${op.id}/signal/${encodeURIComponent(key)}`;
    const result =
      errorMessage === null ? await post(path) : await post(`${path}/fail`, { json: { errorMessage } });
    onChanged();
    return result;
  });
  const items = waiting.data?.items ?? [];
  const keyed = groups(items, op.id);
  return html`<section aria-labelledby="waiting-title">
    <h2 id="waiting-title">Waiting for a signal</h2>
    <${ErrorMessage} error=${waiting.error} prefix="Could not load waiting rows" />
    <${SignalOutcome} result=${state.result} />
    <${ErrorMessage} error=${state.error} prefix="Signal refused" />
    ${waiting.data && keyed.length === 0 && html`<p class="hint">No row is waiting for a signal.</p>`}
    ${keyed.length > 0 &&
    html`<p class="hint">A signal completes the row that has waited longest under its key.</p>
      <ul class="signals">
        ${keyed.map(
          ([key, rows], index) => html`<${KeyControls} key=${key} signalKey=${key} index=${index} rows=${rows}
            disabled=${Boolean(readOnly) || state.busy} onSignal=${async (k, m) => Boolean(await signal(k, m))} />`,
        )}
      </ul>`}
    ${waiting.data?.hasNextPage && html`<p class="hint">More than ${WAITING_PAGE} rows wait; the first are shown.</p>`}
  </section>`;
}
