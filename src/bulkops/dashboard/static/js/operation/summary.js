// The top of an operation's page: status, progress, counters, timings, metadata, the
// original file, cancel, and for a finished dry run "Run for real" (a create that reads the
// dry run's file with its fixed rows' data).
import { useEffect, useRef, useState } from "preact/hooks";
import { get, post } from "../api.js";
import { bytes, count, duration, time } from "../format.js";
import { POLL_MS, useAction, useLoad } from "../hooks.js";
import { html } from "../html.js";
import { Link, navigate, paths } from "../router.js";
import { DownloadButton, ErrorMessage, ProgressBar, StatusText, TERMINAL } from "../widgets.js";
import { UndoControl, UndoLinks } from "./undo.js";

const RUNNABLE = new Set(["Completed", "CompletedWithErrors"]);

function RunForReal({ op, readOnly }) {
  const [run, state] = useAction(async () => {
    const form = new FormData();
    form.set("operationName", op.operationName);
    form.set("metadata", JSON.stringify(op.metadata ?? {}));
    form.set("sourceOperationId", op.id);
    const created = await post("/api/bulks", { form });
    navigate(paths.operation(created.operationId));
    return created;
  });
  if (!op.dryRun || !RUNNABLE.has(op.status)) return null;
  return html`<div class="run-for-real">
    <p class="hint">Run the file for real with the rows you fixed here (same metadata).</p>
    <button type="button" class="primary" disabled=${Boolean(readOnly) || state.busy} onClick=${() => run()}>
      Run for real</button>
    <${ErrorMessage} error=${state.error} prefix="Could not start the run" />
  </div>`;
}

function Term({ name, children }) {
  return html`<div class="term"><dt>${name}</dt><dd>${children}</dd></div>`;
}

function CancelControl({ op, readOnly, onChanged }) {
  const [confirming, setConfirming] = useState(false);
  const confirm = useRef(null);
  const [cancel, state] = useAction(async () => {
    const status = await post(`/api/bulks/${op.id}/cancel`);
    setConfirming(false);
    onChanged();
    return status;
  });
  useEffect(() => {
    if (confirming) confirm.current?.focus();
  }, [confirming]);
  if (TERMINAL.has(op.status)) return html`<${ErrorMessage} error=${state.error} prefix="Cancel failed" />`;
  return html`<div class="cancel">
    ${!confirming &&
    html`<button type="button" class="danger" disabled=${Boolean(readOnly)} onClick=${() => setConfirming(true)}>
      Cancel operation</button>`}
    ${confirming &&
    html`<div role="group" aria-label="Confirm cancel" class="confirm">
      <p>Cancel this operation? Rows not processed yet will stay unprocessed.</p>
      <button type="button" class="danger" ref=${confirm} disabled=${state.busy} onClick=${() => cancel()}>
        Yes, cancel the operation</button>
      <button type="button" onClick=${() => setConfirming(false)}>Keep it running</button>
    </div>`}
    <${ErrorMessage} error=${state.error} prefix="Cancel failed" />
  </div>`;
}

// Operations are shared, not queued behind each other: a Pending one waits to be claimed
// (higher priority first, then oldest), a Running one shares the workers with the others.
function Sharing({ op }) {
  const active = op.status === "Pending" || op.status === "Running";
  const [state] = useLoad(
    () => (active ? get("/api/bulks", { status: op.status, pageSize: 100 }) : Promise.resolve(null)),
    [op.id, op.status],
    { every: POLL_MS, live: active },
  );
  const items = state.data?.items;
  if (!active || !items) return null;
  const mine = op.priority ?? 0;
  if (op.status === "Pending") {
    const ahead = items.filter(
      (other) =>
        other.id !== op.id &&
        ((other.priority ?? 0) > mine || ((other.priority ?? 0) === mine && other.createdAt < op.createdAt)),
    ).length;
    return html`<p class="hint" data-testid="sharing">Waiting for a worker: position ${ahead + 1} of
      ${items.length} waiting (higher priority first).</p>`;
  }
  const peers = items.filter((other) => (other.priority ?? 0) === mine).length;
  const above = items.filter((other) => (other.priority ?? 0) > mine).length;
  const share = peers ? Math.round(100 / peers) : 100;
  return html`<p class="hint" data-testid="sharing">Sharing the workers with ${items.length - 1} other running
    ${items.length === 2 ? "operation" : "operations"}: about ${share}% of the rows of priority ${mine}${
      above ? html`, behind ${above} of higher priority` : ""}.</p>`;
}

/** Status, progress and facts of one operation. */
export function Summary({ op, readOnly, onChanged }) {
  const metadata = Object.entries(op.metadata ?? {});
  return html`<div class="summary">
    <div class="status-line" role="status" aria-live="polite">
      Status: <${StatusText} status=${op.status} />
    </div>
    <${ProgressBar} processed=${op.processedRows} total=${op.totalRows} label="Progress" />
    <${Sharing} op=${op} />
    ${op.dryRun &&
    html`<p class="alert alert-info"><span class="tag">Dry run</span> Every row is validated; nothing is processed.</p>`}
    ${op.errorMessage && html`<p class="alert alert-error">${op.errorMessage}</p>`}
    <${CancelControl} op=${op} readOnly=${readOnly} onChanged=${onChanged} />
    <${RunForReal} op=${op} readOnly=${readOnly} />
    <${UndoLinks} op=${op} />
    <${UndoControl} op=${op} readOnly=${readOnly} />
    <h2 class="visually-hidden">Facts</h2>
    <dl class="facts">
      <${Term} name="Total rows">${count(op.totalRows)}<//>
      <${Term} name="Processed">${count(op.processedRows)}<//>
      <${Term} name="Succeeded">${count(op.successfulRows)}<//>
      <${Term} name="Failed">${count(op.errorCount)}<//>
      <${Term} name="Retry rounds">${count(op.retryCount)}<//>
      <${Term} name="Priority">${op.priority ?? 0}<//>
      <${Term} name="Created by">${op.createdBy}<//>
      ${op.tenant && html`<${Term} name="Tenant">${op.tenant}<//>`}
      <${Term} name="Created"><time datetime=${op.createdAt}>${time(op.createdAt)}</time><//>
      <${Term} name="Started">${op.startedAt ? html`<time datetime=${op.startedAt}>${time(op.startedAt)}</time>` : "not yet"}<//>
      <${Term} name="Completed">${op.completedAt ? html`<time datetime=${op.completedAt}>${time(op.completedAt)}</time>` : "not yet"}<//>
      <${Term} name=${op.completedAt ? "Took" : "Running for"}>${duration(op.startedAt, op.completedAt)}<//>
      <${Term} name="Source">${op.source}<//>
      <${Term} name="File">${op.fileName} (${bytes(op.fileSize)})<//>
      ${op.sourceOperationId &&
      html`<${Term} name="Read from"><${Link} href=${paths.operation(op.sourceOperationId)}>
        <span class="mono">${op.sourceOperationId}</span></${Link}> (with its fixed rows)<//>`}
    </dl>
    <${DownloadButton} path=${`/api/bulks/${op.id}/file`} label=${`Download original file ${op.fileName}`}>
      Download original file</${DownloadButton}>
    <h2>Metadata</h2>
    ${metadata.length === 0 && html`<p class="hint">No metadata.</p>`}
    ${metadata.length > 0 &&
    html`<dl class="facts metadata">
      ${metadata.map(([key, value]) => html`<${Term} key=${key} name=${key}><code>${JSON.stringify(value)}</code><//>`)}
    </dl>`}
  </div>`;
}
