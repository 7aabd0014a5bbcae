// Following an event feed with the `since` cursor: nothing twice, nothing skipped.
import { useEffect, useRef, useState } from "preact/hooks";
import { get } from "./api.js";
import { time } from "./format.js";
import { html } from "./html.js";
import { Link, paths } from "./router.js";
import { TableBox } from "./widgets.js";

const KEEP = 500; // events kept on screen, newest first

/**
 * A hook that polls `path` after the highest sequence seen. With `adopt`, the first poll only
 * takes the cursor (as the API advises for a live feed), so only new events are shown.
 * Returns {events (newest first), error, started, more(limit)}.
 */
export function useFeed(path, { tick, adopt = false, limit = 100 }) {
  const cursor = useRef(null);
  const [events, setEvents] = useState([]);
  const [error, setError] = useState(null);
  const [started, setStarted] = useState(false);

  const add = (found) => {
    if (!found.length) return;
    const last = found[found.length - 1].sequence;
    cursor.current = Math.max(cursor.current ?? 0, last);
    setEvents((old) => {
      const seen = new Set(old.map((e) => e.sequence));
      const fresh = found.filter((e) => !seen.has(e.sequence)).reverse();
      return [...fresh, ...old].sort((a, b) => b.sequence - a.sequence).slice(0, KEEP);
    });
  };

  useEffect(() => {
    let stopped = false;
    (async () => {
      try {
        if (cursor.current === null && adopt) {
          const newest = await get(path, { limit: 1 });
          if (stopped) return;
          cursor.current = newest.length ? newest[newest.length - 1].sequence : 0;
        } else {
          const found = await get(path, { since: cursor.current ?? undefined, limit });
          if (stopped) return;
          add(found);
        }
        setError(null);
        setStarted(true);
      } catch (failure) {
        if (!stopped) setError(failure);
      }
    })();
    return () => {
      stopped = true;
    };
  }, [path, tick]);

  // Earlier events, on request: the newest `count` before now, merged in.
  const more = async (count) => {
    try {
      add(await get(path, { limit: count }));
    } catch (failure) {
      setError(failure);
    }
  };
  return { events, error, started, more };
}

/** A table of events; `withOperation` adds a link to each event's operation. */
export function EventTable({ events, withOperation, label }) {
  return html`<${TableBox} label=${label}>
    <table class="events stack">
      <thead><tr>
        <th scope="col">#</th><th scope="col">Time</th>
        ${withOperation && html`<th scope="col">Operation</th>`}
        <th scope="col">Type</th><th scope="col">Severity</th><th scope="col">Actor</th><th scope="col">Message</th>
      </tr></thead>
      <tbody>${events.map(
        (e) => html`<tr key=${e.sequence} class=${`severity-${String(e.severity).toLowerCase()}`}>
          <td data-label="#" class="num">${e.sequence}</td>
          <td data-label="Time"><time datetime=${e.timestamp}>${time(e.timestamp)}</time></td>
          ${withOperation &&
          html`<td data-label="Operation"><${Link} href=${paths.operation(e.operationId)}>${e.operationName}</${Link}>${" "}
            <span class="hint mono">${e.operationId.slice(0, 8)}</span></td>`}
          <td data-label="Type">${e.type}</td>
          <td data-label="Severity">${e.severity}</td>
          <td data-label="Actor" class="actor">${e.actor ?? "system"}</td>
          <td data-label="Message" class="message">${e.message}</td>
        </tr>`,
      )}</tbody>
    </table>
  </${TableBox}>`;
}
