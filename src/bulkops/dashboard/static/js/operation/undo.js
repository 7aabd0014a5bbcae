// Undo of a finished operation whose operation defines one: "Undo" asks the API for a
// preview, shows its counts in the confirmation, then creates the undo operation and opens
// it. An operation and its undo link to each other.
import { useEffect, useRef, useState } from "preact/hooks";
import { post } from "../api.js";
import { useCatalog } from "../catalog.js";
import { count } from "../format.js";
import { useAction } from "../hooks.js";
import { html } from "../html.js";
import { Link, navigate, paths } from "../router.js";
import { ErrorMessage, TERMINAL } from "../widgets.js";

function plural(n, word) {
  return `${count(n)} ${word}${n === 1 ? "" : "s"}`;
}

function refusal(error) {
  return error?.body?.reason ? new Error(`Undo refused: ${error.body.reason}`) : error;
}

/** Links between an operation and its undo. */
export function UndoLinks({ op }) {
  return html`${op.undoOf &&
    html`<p class="alert alert-info" data-testid="undo-of">This operation undoes
      <${Link} href=${paths.operation(op.undoOf)}><span class="mono">${op.undoOf}</span></${Link}>.</p>`}
    ${op.undoneBy &&
    html`<p class="alert alert-info" data-testid="undone-by">Undone by
      <${Link} href=${paths.operation(op.undoneBy)}><span class="mono">${op.undoneBy}</span></${Link}>.</p>`}`;
}

/** The "Undo" button and its confirmation (with the preview's counts). */
export function UndoControl({ op, readOnly }) {
  const [catalog] = useCatalog();
  const [preview, setPreview] = useState(null);
  const confirm = useRef(null);
  const [ask, asking] = useAction(async () => {
    const counted = await post(`/api/bulks/${op.id}/undo`, { json: { preview: true } });
    setPreview(counted);
    return counted;
  });
  const [undo, undoing] = useAction(async () => {
    const created = await post(`/api/bulks/${op.id}/undo`, { json: {} });
    setPreview(null);
    navigate(paths.operation(created.id));
    return created;
  });
  useEffect(() => {
    if (preview) confirm.current?.focus();
  }, [preview]);
  const descriptor = catalog.data?.find((d) => d.name === op.operationName);
  const possible =
    descriptor?.undoable && TERMINAL.has(op.status) && !op.dryRun && !op.undoOf && !op.undoneBy;
  if (!possible) return null;
  return html`<div class="undo">
    ${!preview &&
    html`<button type="button" disabled=${Boolean(readOnly) || asking.busy} onClick=${() => ask()}>
      Undo</button>`}
    ${preview &&
    html`<div role="group" aria-label="Confirm undo" class="confirm">
      <p>Undo ${plural(preview.rows, "row")} (${plural(preview.steps, "step")})? Each row's
        completed steps are undone, the last first, in a new operation.</p>
      <button type="button" class="danger" ref=${confirm} disabled=${undoing.busy} onClick=${() => undo()}>
        Yes, undo</button>
      <button type="button" onClick=${() => setPreview(null)}>Keep it</button>
    </div>`}
    <${ErrorMessage} error=${refusal(asking.error ?? undoing.error)} prefix="Undo failed" />
  </div>`;
}
