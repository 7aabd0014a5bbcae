// The metadata form, generated from the descriptor's metadataFields: an input per field with
// its type, whether it is required, and whether it may be null (a trailing "?").
import { html } from "../html.js";

/** {base, nullable} of a descriptor type such as "int?". */
export function fieldType(type) {
  const nullable = type.endsWith("?");
  return { base: nullable ? type.slice(0, -1) : type, nullable };
}

const INPUTS = {
  int: { type: "number", step: "1", inputmode: "numeric" },
  decimal: { type: "number", step: "any", inputmode: "decimal" },
  float: { type: "number", step: "any", inputmode: "decimal" },
  datetime: { type: "datetime-local", step: "1" },
  date: { type: "date" },
  guid: { type: "text", spellcheck: false, placeholder: "00000000-0000-0000-0000-000000000000" },
};

function describe(field) {
  const { base, nullable } = fieldType(field.type);
  const parts = [base];
  parts.push(field.required ? "required" : "optional");
  if (nullable) parts.push("may be empty (null)");
  return parts.join(", ");
}

function Field({ field, value, onInput }) {
  const id = `meta-${field.name}`;
  const { base, nullable } = fieldType(field.type);
  const set = (event) => onInput(field.name, event.currentTarget.value);
  let input;
  if (base === "bool") {
    input = html`<select id=${id} value=${value} onChange=${set} aria-describedby=${`${id}-hint`}
      aria-required=${field.required}>
      <option value="">${field.required && !nullable ? "Choose" : "Not set"}</option>
      <option value="true">true</option>
      <option value="false">false</option>
    </select>`;
  } else {
    const attrs = INPUTS[base] ?? { type: "text" };
    input = html`<input id=${id} name=${field.name} value=${value} onInput=${set} ...${attrs}
      aria-describedby=${`${id}-hint`} aria-required=${field.required} />`;
  }
  return html`<div class="field">
    <span class="label-line">
      <label for=${id}>${field.name}</label>
      ${field.required && html`<span class="required" aria-hidden="true">*</span>`}
    </span>
    ${input}
    <span class="hint" id=${`${id}-hint`}>${describe(field)}</span>
  </div>`;
}

/** The inputs of every metadata field; `values` holds the text of each, by field name. */
export function MetadataFields({ fields, values, onInput }) {
  if (!fields.length) return html`<p class="hint">This operation takes no metadata.</p>`;
  return html`<div class="fields">
    ${fields.map((field) => html`<${Field} key=${field.name} field=${field} value=${values[field.name] ?? ""} onInput=${onInput} />`)}
  </div>`;
}

function convert(base, text) {
  switch (base) {
    case "int": {
      const n = Number(text);
      return Number.isInteger(n) ? n : text;
    }
    case "float": {
      const n = Number(text);
      return Number.isFinite(n) ? n : text;
    }
    case "bool":
      return text === "true";
    case "datetime": {
      // The input is in the browser's time zone; the service gets an instant.
      const d = new Date(text);
      return Number.isNaN(d.getTime()) ? text : d.toISOString();
    }
    default:
      return text; // decimals stay text so no digit is lost
  }
}

/** The metadata JSON object: empty fields are left out, or null when required and nullable. */
export function metadataObject(fields, values) {
  const result = {};
  for (const field of fields) {
    const text = (values[field.name] ?? "").trim();
    const { base, nullable } = fieldType(field.type);
    if (text === "") {
      if (field.required && nullable) result[field.name] = null;
      continue;
    }
    result[field.name] = convert(base, text);
  }
  return result;
}
