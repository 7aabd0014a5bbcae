// Fixing a failed row in place (PATCH /api/bulks/{id}/rows/{rowNumber}): its file columns as
// inputs, saved whole; the server validates at once, and its messages are shown at the field
// they name (those naming no field above the form).
import { useState } from "preact/hooks";
import { request } from "../api.js";
import { useAction } from "../hooks.js";
import { html } from "../html.js";
import { ErrorMessage } from "../widgets.js";

// Keys the readers put into row data for content without a column (never edited).
const RAW_KEYS = new Set(["_extra", "_line", "_value"]);

const fold = (name) => name.trim().toLowerCase();

/** The columns a failed row's editor shows: its data's, then the operation's missing ones. */
export function editableColumns(row, descriptor, columnMap) {
  const names = [];
  const seen = new Set();
  const add = (name) => {
    if (!seen.has(fold(name))) {
      seen.add(fold(name));
      names.push(name);
    }
  };
  for (const key of Object.keys(row.rowData ?? {})) if (!RAW_KEYS.has(key)) add(key);
  const mapped = new Set(Object.values(columnMap ?? {}).map(fold)); // model names read from others
  for (const column of descriptor?.fileColumns ?? []) if (!mapped.has(fold(column.name))) add(column.name);
  return names;
}

const escaped = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The one column a free-text message names as a word ("Invalid email address"), if any. */
function namedColumn(message, byName) {
  const found = new Set();
  for (const [name, column] of byName) {
    if (new RegExp(`(^|[^\\p{L}\\p{N}_])${escaped(name)}($|[^\\p{L}\\p{N}_])`, "iu").test(message)) found.add(column);
  }
  return found.size === 1 ? [...found][0] : undefined;
}

/** Split server messages into those of a column ("column: problem", or a message naming one
 * column) and the rest. */
export function placeErrors(errors, columns, columnMap) {
  const byName = new Map(columns.map((c) => [fold(c), c]));
  for (const [file, model] of Object.entries(columnMap ?? {})) {
    if (byName.has(fold(file))) byName.set(fold(model), byName.get(fold(file)));
  }
  const fields = {};
  const general = [];
  for (const message of errors) {
    const cut = message.indexOf(": ");
    const prefixed = cut > 0 ? byName.get(fold(message.slice(0, cut))) : undefined;
    const column = prefixed ?? namedColumn(message, byName);
    if (column === undefined) general.push(message);
    else (fields[column] ??= []).push(prefixed === undefined ? message : message.slice(cut + 2));
  }
  return { fields, general };
}

const text = (value) => (value === undefined || value === null ? "" : typeof value === "string" ? value : JSON.stringify(value));

/** The editor of one failed row, as a table row spanning the failed-rows table. */
export function RowEditor({ op, row, columns, span, onSaved, onClose }) {
  const [values, setValues] = useState(() => Object.fromEntries(columns.map((c) => [c, text(row.rowData?.[c])])));
  const [save, state] = useAction(async () => {
    const rowData = {};
    for (const column of columns) {
      // A column the row had is always sent (the whole row); a new one only when filled in.
      if (values[column] !== "" || (row.rowData && column in row.rowData)) rowData[column] = values[column];
    }
    const answer = await request("PATCH", `/api/bulks/${op.id}/rows/${row.rowNumber}`, {
      json: { rowData },
      accept: [422],
    });
    if (answer.status === 422) return { errors: answer.body?.errors ?? [answer.body?.error ?? "Invalid data"] };
    onSaved(answer.body);
    return { saved: true };
  });
  const errors = state.result?.errors ?? [];
  const { fields, general } = placeErrors(errors, columns, op.columnMap);
  const idOf = (column, index) => `fix-${row.rowNumber}-${index}`;
  return html`<tr class="row-editor"><td colspan=${span}>
    <form class="fix" aria-label=${`Fix row ${row.rowNumber}`} noValidate onSubmit=${(event) => {
      event.preventDefault();
      save();
    }}>
      <p class="hint">Correct row ${row.rowNumber} and save it: the service checks it at once, and the next retry runs it with this data.</p>
      ${errors.length > 0 &&
      html`<div class="alert alert-error" role="alert">
        <p>Row ${row.rowNumber} was not saved: ${errors.length === 1 ? "one problem" : `${errors.length} problems`}.</p>
        ${general.length > 0 && html`<ul>${general.map((message) => html`<li>${message}</li>`)}</ul>`}
      </div>`}
      <div class="fix-fields">
        ${columns.map((column, index) => {
          const id = idOf(column, index);
          const problems = fields[column];
          return html`<div class="field" key=${column}>
            <label for=${id}>${column}</label>
            <input id=${id} value=${values[column]} aria-invalid=${problems ? "true" : undefined}
              aria-describedby=${problems ? `${id}-error` : undefined}
              onInput=${(event) => setValues({ ...values, [column]: event.currentTarget.value })} />
            ${problems && html`<span class="field-error" id=${`${id}-error`}>${problems.join("; ")}</span>`}
          </div>`;
        })}
      </div>
      <div class="toolbar">
        <button type="submit" class="primary" disabled=${state.busy}>Save row ${row.rowNumber}</button>
        <button type="button" onClick=${onClose}>Cancel editing</button>
      </div>
      <${ErrorMessage} error=${state.error} prefix="Could not save the row" />
    </form>
  </td></tr>`;
}
