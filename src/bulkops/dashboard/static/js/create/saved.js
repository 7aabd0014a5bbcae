// Saved column mappings on the create page: a picker of the mappings saved for the chosen
// operation (GET /api/operations/{name}/mappings), sent as `mapping=<name>`, and "Save this
// mapping" (PUT .../mappings/{mapping}) for the mapping the table shows.
import { useEffect, useState } from "preact/hooks";
import { get, request } from "../api.js";
import { html } from "../html.js";
import { ErrorMessage } from "../widgets.js";

const mappingsPath = (operation) => `/api/operations/${encodeURIComponent(operation)}/mappings`;

/** The saved mappings of `operation`: [{items, error}, reload]. */
export function useSavedMappings(operation) {
  const [state, setState] = useState({ items: [], error: null });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let current = true;
    setState({ items: [], error: null });
    if (operation) {
      get(mappingsPath(operation)).then(
        (body) => current && setState({ items: body.items ?? [], error: null }),
        (error) => current && setState({ items: [], error }),
      );
    }
    return () => {
      current = false;
    };
  }, [operation, round]);
  return [state, () => setRound((n) => n + 1)];
}

/** The picker: "" (none) or a saved mapping's name. */
export function SavedMappingPicker({ saved, chosen, onChoose }) {
  if (saved.error) return html`<${ErrorMessage} error=${saved.error} prefix="Could not load the saved mappings" />`;
  if (saved.items.length === 0) return null;
  const shown = saved.items.find((m) => m.name === chosen);
  return html`<div class="field">
    <label for="saved-mapping">Saved mapping</label>
    <select id="saved-mapping" value=${chosen} aria-describedby="saved-mapping-hint"
      onChange=${(e) => onChoose(e.currentTarget.value, saved.items.find((m) => m.name === e.currentTarget.value))}>
      <option value="">None</option>
      ${saved.items.map((m) => html`<option value=${m.name}>${m.name}</option>`)}
    </select>
    <span class="hint" id="saved-mapping-hint">optional; a column mapping saved for this operation, sent by its name</span>
    ${shown &&
    html`<p class="hint" role="status">Maps ${Object.entries(shown.columnMap)
      .map(([from, to]) => `${from} → ${to}`)
      .join(", ")}.</p>`}
  </div>`;
}

/** "Save this mapping": keeps `columnMap` under a name the user gives. */
export function SaveMapping({ operation, columnMap, disabled, onSaved }) {
  const [name, setName] = useState("");
  const [state, setState] = useState({ busy: false, error: null, saved: "" });
  const save = async () => {
    const chosen = name.trim();
    if (!chosen) {
      setState({ busy: false, error: new Error("Give the mapping a name."), saved: "" });
      return;
    }
    setState({ busy: true, error: null, saved: "" });
    try {
      await request("PUT", `${mappingsPath(operation)}/${encodeURIComponent(chosen)}`, { json: { columnMap } });
      setState({ busy: false, error: null, saved: chosen });
      onSaved(chosen);
    } catch (error) {
      setState({ busy: false, error, saved: "" });
    }
  };
  return html`<div class="field save-mapping">
    <label for="mapping-name">Mapping name</label>
    <input id="mapping-name" value=${name} onInput=${(e) => setName(e.currentTarget.value)}
      aria-describedby="mapping-name-hint" />
    <span class="hint" id="mapping-name-hint">save the mapping above under this name, to pick it next time</span>
    <button type="button" disabled=${disabled || state.busy || Object.keys(columnMap).length === 0} onClick=${save}>
      Save this mapping
    </button>
    ${state.saved && html`<span role="status">Saved mapping ${state.saved}.</span>`}
    <${ErrorMessage} error=${state.error} prefix="Could not save the mapping" />
  </div>`;
}
