// The live event feed across operations. As the API advises, the first poll only adopts the
// cursor; from then on each new event appears at the top.
import { useState } from "preact/hooks";
import { EventTable, useFeed } from "../feed.js";
import { POLL_MS, useTicker } from "../hooks.js";
import { html } from "../html.js";
import { ErrorMessage } from "../widgets.js";

/** The events page. */
export function EventsPage() {
  const [paused, setPaused] = useState(false);
  const tick = useTicker(POLL_MS, !paused);
  const feed = useFeed("/api/events", { tick, adopt: true });
  return html`<section>
    <h1 tabindex="-1">Events</h1>
    <p>New events of every operation, as they happen (checked every 2 s).</p>
    <div class="toolbar">
      <button type="button" onClick=${() => setPaused(!paused)} aria-pressed=${paused}>Pause live events</button>
      ${paused && html`<span role="status">Paused</span>`}
      <button type="button" onClick=${() => feed.more(100)}>Show the 100 latest events</button>
    </div>
    <${ErrorMessage} error=${feed.error} prefix="Could not load events" />
    ${feed.started && feed.events.length === 0 && html`<p class="hint" role="status">Waiting for new events…</p>`}
    ${feed.events.length > 0 && html`<${EventTable} events=${feed.events} withOperation label="Events" />`}
  </section>`;
}
