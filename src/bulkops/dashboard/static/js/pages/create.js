// New operation: pick an operation, fill its metadata, choose a file or give the URL the
// service reads it from (mapping its columns when they differ, or picking a saved mapping;
// an Excel workbook's worksheet by name), optionally add webhooks, validate
// (POST /api/bulks/validate) and create. A file validate finds already submitted (its
// duplicateOf) is created only once the user confirms.
// Create validates first, so problems show before anything is submitted; a dry run is
// created at once (it validates every row and reports every problem itself).
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { useAccess } from "../access.js";
import { request } from "../api.js";
import { useCatalog } from "../catalog.js";
import {
  columnMap,
  fileKind,
  mappingProblems,
  needsMapping,
  readHeader,
  suggestMapping,
} from "../create/columns.js";
import { ColumnMapping } from "../create/mapping.js";
import { SaveMapping, SavedMappingPicker, useSavedMappings } from "../create/saved.js";
import { MetadataFields, metadataObject } from "../create/metadata.js";
import { NotificationsEditor, notificationsValue } from "../create/notifications.js";
import { html } from "../html.js";
import { navigate, paths } from "../router.js";
import { DownloadButton, ErrorMessage, ReadOnlyNote, TableBox } from "../widgets.js";

// A random UUID without crypto.randomUUID, which only exists on https and localhost pages.
function randomKey() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function Descriptor({ op }) {
  return html`<div class="descriptor">
    ${op.description && html`<p>${op.description}</p>`}
    ${op.steps?.length > 0 && html`<p><strong>Steps:</strong> ${op.steps.join(" → ")}</p>`}
    <${TableBox} label=${`File columns of ${op.name}`}>
      <table>
        <caption>File columns</caption>
        <thead><tr><th scope="col">Column</th><th scope="col">Type</th><th scope="col">Required</th></tr></thead>
        <tbody>${op.fileColumns.map(
          (c) => html`<tr key=${c.name}><td><code>${c.name}</code></td><td>${c.type}</td><td>${c.required ? "yes" : "no"}</td></tr>`,
        )}</tbody>
      </table>
    </${TableBox}>
    <${DownloadButton} path=${`/api/operations/${encodeURIComponent(op.name)}/template`}
      label=${`Download template for ${op.name}`}>Download template</${DownloadButton}>
  </div>`;
}

function DuplicateWarning({ id, onConfirm, blocked }) {
  return html`<div class="alert alert-warn duplicate" role="alert">
    <p><strong>This file was submitted before</strong>, as operation
      <a href=${paths.operation(id)}><code>${id}</code></a> (the same SHA-256).</p>
    ${onConfirm &&
    html`<button type="button" disabled=${blocked} onClick=${onConfirm}>Create anyway</button>`}
  </div>`;
}

function ValidationResult({ result }) {
  if (!result) return null;
  if (result.valid) return html`<p class="alert alert-ok" role="status">Validation passed: the metadata and the file look right.</p>`;
  return html`<div class="alert alert-error validation" role="alert">
    <p><strong>Validation failed.</strong> Fix these problems, then try again.</p>
    ${result.metadataErrors?.length > 0 &&
    html`<h3>Metadata errors</h3><ul>${result.metadataErrors.map((e) => html`<li>${e}</li>`)}</ul>`}
    ${result.fileErrors?.length > 0 &&
    html`<h3>File errors</h3><ul>${result.fileErrors.map((e) => html`<li>${e}</li>`)}</ul>`}
  </div>`;
}

// The chosen file's columns as the page reads them; `unread` once it is known that the
// page does not read them (an Excel workbook, say), so the server's check must do.
function useFileHeader(file) {
  const [state, setState] = useState({ header: null, error: null, unread: false });
  useEffect(() => {
    let current = true;
    setState({ header: null, error: null, unread: false });
    if (file) {
      readHeader(file).then(
        (header) => current && setState({ header, error: null, unread: header === null }),
        (error) => current && setState({ header: null, error, unread: false }),
      );
    }
    return () => {
      current = false;
    };
  }, [file]);
  return state;
}

/** The new-operation page. */
export function CreatePage({ route }) {
  const access = useAccess();
  const [catalog] = useCatalog();
  const operations = catalog.data ?? [];
  const name = route.query.get("operation") || operations[0]?.name || "";
  const op = operations.find((o) => o.name === name);

  const [values, setValues] = useState({});
  const [createdBy, setCreatedBy] = useState("");
  const [file, setFile] = useState(null);
  const [sheet, setSheet] = useState("");
  const [mapping, setMapping] = useState({});
  const [recipients, setRecipients] = useState([]);
  const [dryRun, setDryRun] = useState(false);
  const [origin, setOrigin] = useState("file"); // "file" (an upload) or "url" (sourceUrl)
  const [sourceUrl, setSourceUrl] = useState("");
  const [savedName, setSavedNameState] = useState("");
  // The pick as of now, for the header's effect: an effect may run after a later pick (Preact
  // runs a pending effect before the next render), and must not put back the mapping it replaced.
  const pickedRef = useRef("");
  const setSavedName = (chosen) => {
    pickedRef.current = chosen;
    setSavedNameState(chosen);
  };
  const [confirmed, setConfirmed] = useState(""); // the duplicate the user chose to ignore
  const [saved, reloadSaved] = useSavedMappings(op?.name);
  const [outcome, setOutcome] = useState({ busy: "", result: null, error: null });
  const fromUrl = origin === "url";
  const { header, error: headerError, unread } = useFileHeader(fromUrl ? null : file);
  const workbook = fromUrl ? /\.xlsx$/i.test(sourceUrl.split("?")[0]) : Boolean(file) && fileKind(file) === "xlsx";

  const mappingShown = Boolean(op && header && needsMapping(header, op.fileColumns));
  // The suggestion, with the saved mapping picked (if any) on top of it.
  const mappingFor = (item) => {
    if (!op || !header) return {};
    const next = suggestMapping(header, op.fileColumns);
    for (const [from, to] of Object.entries(item?.columnMap ?? {})) if (from in next) next[from] = to;
    return next;
  };
  const savedItemsRef = useRef(saved.items);
  savedItemsRef.current = saved.items;
  useEffect(
    () => setMapping(mappingFor(savedItemsRef.current.find((m) => m.name === pickedRef.current))),
    [op, header],
  );
  useEffect(() => setSavedName(""), [op]);
  // A new key whenever the submission changes; the same key if the very same one is resent.
  const idempotencyKey = useMemo(randomKey, [
    name, file, sheet, values, createdBy, mapping, recipients, dryRun, origin, sourceUrl, savedName,
  ]);

  // A saved mapping chosen: sent by name, and shown in the table when the file's columns are.
  const chooseSaved = (chosen, item) => {
    setSavedName(chosen);
    if (item && op && header) setMapping(mappingFor(item));
  };
  const editMapping = (next) => {
    setMapping(next);
    setSavedName(""); // edited: the table's mapping is sent, not the saved one
  };

  const chooseOperation = (event) => {
    setValues({});
    setOutcome({ busy: "", result: null, error: null });
    navigate(paths.create(event.currentTarget.value), { replace: true });
  };

  const buildForm = () => {
    const form = new FormData();
    form.set("operationName", name);
    form.set("metadata", JSON.stringify(metadataObject(op.metadataFields, values)));
    if (fromUrl) form.set("sourceUrl", sourceUrl.trim());
    else form.set("file", file, file.name);
    if (workbook && sheet.trim()) form.set("sheet", sheet.trim());
    if (createdBy.trim()) form.set("createdBy", createdBy.trim());
    const map = columnMap(mapping);
    if (savedName) form.set("mapping", savedName);
    else if (mappingShown && Object.keys(map).length) form.set("columnMap", JSON.stringify(map));
    const notifications = notificationsValue(recipients);
    if (notifications) form.set("notifications", notifications);
    return form;
  };

  const withDryRun = (form) => {
    if (dryRun) form.set("dryRun", "true");
    return form;
  };

  const run = async (create, accepted = confirmed) => {
    if (fromUrl ? !sourceUrl.trim() : !file) {
      const missing = fromUrl ? "Enter the URL of the file." : "Choose a file to upload.";
      setOutcome({ busy: "", result: null, error: new Error(missing) });
      return;
    }
    setOutcome({ busy: create ? "Creating" : "Validating", result: null, error: null });
    try {
      // A dry run reports every row's problems itself: only a plain create is held back by
      // the problems validate finds (bad metadata still comes back as a 422 from create).
      const checked =
        create && dryRun
          ? { body: { valid: true } }
          : await request("POST", "/api/bulks/validate", { form: buildForm(), accept: [422] });
      const duplicate = checked.body.duplicateOf;
      if (!create || !checked.body.valid || (duplicate && duplicate !== accepted)) {
        setOutcome({ busy: "", result: checked.body, error: null });
        return;
      }
      const created = await request("POST", "/api/bulks", {
        form: withDryRun(buildForm()),
        headers: { "Idempotency-Key": idempotencyKey },
        accept: [422],
      });
      if (created.status === 422) {
        setOutcome({ busy: "", result: created.body, error: null });
        return;
      }
      const id = created.body.operationId ?? created.body.id;
      navigate(paths.operation(id));
    } catch (error) {
      setOutcome({ busy: "", result: null, error });
    }
  };

  const problems = mappingShown ? mappingProblems(mapping, op.fileColumns) : { missing: [], twice: [] };
  const blocked = Boolean(access.readOnly) || Boolean(outcome.busy) || problems.twice.length > 0;
  const submit = (event) => {
    event.preventDefault();
    run(true);
  };
  const createAnyway = () => {
    const duplicate = outcome.result?.duplicateOf ?? "";
    setConfirmed(duplicate);
    run(true, duplicate);
  };

  return html`<section>
    <h1 tabindex="-1">New operation</h1>
    <${ErrorMessage} error=${catalog.error} prefix="Could not load the operations" />
    <${ReadOnlyNote} reason=${access.readOnly} />
    ${catalog.data && operations.length === 0 && html`<p class="empty">This service has no operations registered.</p>`}
    ${operations.length > 0 &&
    html`<form class="create" onSubmit=${submit} noValidate>
      <div class="step">
        <h2>1. Operation</h2>
        <div class="field">
          <label for="operation">Operation</label>
          <select id="operation" value=${name} onChange=${chooseOperation}>
            ${operations.map((o) => html`<option value=${o.name}>${o.name}</option>`)}
          </select>
        </div>
        ${op && html`<${Descriptor} op=${op} />`}
        ${!op && html`<p class="alert alert-error" role="alert">No operation is named ${name}.</p>`}
      </div>
      ${op &&
      html`<div class="step">
          <h2>2. Metadata</h2>
          <${MetadataFields} fields=${op.metadataFields} values=${values}
            onInput=${(field, value) => setValues({ ...values, [field]: value })} />
          <div class="field">
            <label for="created-by">Created by</label>
            <input id="created-by" value=${createdBy} onInput=${(e) => setCreatedBy(e.currentTarget.value)}
              aria-describedby="created-by-hint" />
            <span class="hint" id="created-by-hint">optional; ignored when the service knows who you are from your token</span>
          </div>
        </div>
        <div class="step">
          <h2>3. File</h2>
          <fieldset class="origin">
            <legend>Where the file is</legend>
            <label><input type="radio" name="origin" value="file" checked=${!fromUrl}
              onChange=${() => setOrigin("file")} /> Upload a file</label>
            <label><input type="radio" name="origin" value="url" checked=${fromUrl}
              onChange=${() => setOrigin("url")} /> From a URL</label>
          </fieldset>
          ${fromUrl
            ? html`<div class="field">
                <label for="source-url">URL of the file</label>
                <input id="source-url" type="url" value=${sourceUrl} placeholder="s3://bucket/exports/users.csv"
                  onInput=${(e) => setSourceUrl(e.currentTarget.value)} aria-describedby="source-url-hint" />
                <span class="hint" id="source-url-hint">the service reads it itself: s3://bucket/key (when its files are on S3), or an http(s) URL its allow list names; the file name comes from the URL's last segment</span>
              </div>`
            : html`<div class="field">
                <label for="file">File</label>
                <input id="file" type="file" accept=".csv,.json,.jsonl,.ndjson,.xlsx,.gz"
                  onChange=${(e) => setFile(e.currentTarget.files[0] ?? null)} aria-describedby="file-hint" />
                <span class="hint" id="file-hint">CSV (with a header line), JSON (an array of objects), JSON Lines or Excel (.xlsx); any of the first three may be gzip-compressed (.gz)</span>
              </div>`}
          <${SavedMappingPicker} saved=${saved} chosen=${savedName} onChoose=${chooseSaved} />
          ${workbook &&
          html`<div class="field">
            <label for="sheet">Sheet</label>
            <input id="sheet" value=${sheet} onInput=${(e) => setSheet(e.currentTarget.value)}
              aria-describedby="sheet-hint" />
            <span class="hint" id="sheet-hint">optional; the worksheet to read (the first one when empty)</span>
          </div>`}
          <${ErrorMessage} error=${headerError} prefix="Could not read the file's columns" />
          ${header && !mappingShown && html`<p class="hint" role="status">Columns found: ${header.join(", ")}.</p>`}
          ${unread &&
          html`<p class="hint" role="status">The columns of this file are not read in the browser: Validate checks them on the server.</p>`}
          ${mappingShown &&
          html`<${ColumnMapping} header=${header} columns=${op.fileColumns} mapping=${mapping} onChange=${editMapping} />`}
          ${mappingShown && !access.readOnly &&
          html`<${SaveMapping} operation=${op.name} columnMap=${columnMap(mapping)} disabled=${Boolean(outcome.busy)}
            onSaved=${(chosen) => {
              reloadSaved();
              setSavedName(chosen);
            }} />`}
        </div>
        <div class="step">
          <h2>4. Notifications <span class="hint">(optional)</span></h2>
          <${NotificationsEditor} recipients=${recipients} onChange=${setRecipients} />
        </div>
        <div class="step">
          <h2>5. Dry run <span class="hint">(optional)</span></h2>
          <div class="field checkbox">
            <label>
              <input type="checkbox" id="dry-run" checked=${dryRun} aria-describedby="dry-run-hint"
                onChange=${(e) => setDryRun(e.currentTarget.checked)} />
              Dry run
            </label>
            <span class="hint" id="dry-run-hint">validate the metadata and every row and report every problem, but process nothing; fix the failed rows on its page, then run it for real</span>
          </div>
        </div>
        <div class="step actions">
          <button type="button" disabled=${blocked} onClick=${() => run(false)}>Validate</button>
          <button type="submit" class="primary" disabled=${blocked}>${dryRun ? "Create dry run" : "Create operation"}</button>
          ${outcome.busy && html`<span role="status">${outcome.busy}…</span>`}
        </div>
        <${ErrorMessage} error=${outcome.error} />
        ${outcome.result?.duplicateOf &&
        html`<${DuplicateWarning} id=${outcome.result.duplicateOf} blocked=${blocked}
          onConfirm=${outcome.result.valid ? createAnyway : null} />`}
        <${ValidationResult} result=${outcome.result} />`}
    </form>`}
  </section>`;
}
