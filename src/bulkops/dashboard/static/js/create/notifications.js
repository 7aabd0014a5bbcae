// Optional webhook recipients, sent as the `notifications` form field:
// {"recipients": [{"channel": "webhook", "target": url, "triggers": [...]}]}.
import { html } from "../html.js";
import { words } from "../format.js";

export const TRIGGERS = ["OnCompletion", "OnCompletionWithErrors", "OnFailure", "OnCancelled", "OnStatusChange"];
const DEFAULT_TRIGGERS = ["OnFailure"]; // what the service assumes when none is given

/** A new, empty recipient. */
export function newRecipient() {
  return { target: "", triggers: [...DEFAULT_TRIGGERS] };
}

/** The `notifications` form value, or null when there is no recipient with a URL. */
export function notificationsValue(recipients) {
  const chosen = recipients.filter((r) => r.target.trim());
  if (!chosen.length) return null;
  return JSON.stringify({
    recipients: chosen.map((r) => ({ channel: "webhook", target: r.target.trim(), triggers: r.triggers })),
  });
}

function Recipient({ recipient, index, onChange, onRemove }) {
  const number = index + 1;
  const id = `webhook-${number}`;
  const toggle = (trigger) => (event) => {
    const on = event.currentTarget.checked;
    const triggers = TRIGGERS.filter((t) => (t === trigger ? on : recipient.triggers.includes(t)));
    onChange({ ...recipient, triggers });
  };
  return html`<fieldset class="recipient">
    <legend>Webhook ${number}</legend>
    <div class="field">
      <label for=${`${id}-url`}>Webhook URL ${number}</label>
      <input id=${`${id}-url`} type="url" placeholder="https://example.com/hooks/bulkops"
        value=${recipient.target} onInput=${(e) => onChange({ ...recipient, target: e.currentTarget.value })} />
    </div>
    <div class="checks" role="group" aria-label=${`When to call webhook ${number}`}>
      ${TRIGGERS.map(
        (trigger) => html`<label class="check">
          <input type="checkbox" checked=${recipient.triggers.includes(trigger)} onChange=${toggle(trigger)} />
          ${words(trigger)}
        </label>`,
      )}
    </div>
    <button type="button" class="link-button" onClick=${onRemove}>Remove webhook ${number}</button>
  </fieldset>`;
}

/** The recipients editor. */
export function NotificationsEditor({ recipients, onChange }) {
  const replace = (index, value) => onChange(recipients.map((r, i) => (i === index ? value : r)));
  return html`<div class="notifications">
    ${recipients.map(
      (recipient, index) => html`<${Recipient} key=${index} recipient=${recipient} index=${index}
        onChange=${(value) => replace(index, value)}
        onRemove=${() => onChange(recipients.filter((_, i) => i !== index))} />`,
    )}
    <button type="button" onClick=${() => onChange([...recipients, newRecipient()])}>Add webhook</button>
  </div>`;
}
