// Small pieces shared by the pages: status text, progress bars, paging, alerts, downloads.
import { useState } from "preact/hooks";
import { download } from "./api.js";
import { percent } from "./format.js";
import { html } from "./html.js";

export const STATUSES = [
  "Pending",
  "Running",
  "Completed",
  "CompletedWithErrors",
  "Failed",
  "Cancelled",
  "Retrying",
];
export const TERMINAL = new Set(["Completed", "CompletedWithErrors", "Failed", "Cancelled"]);
export const ERROR_TYPES = ["Validation", "Processing", "StepFailure", "Timeout", "SignalFailure"];
export const ROW_STATES = ["Pending", "Running", "WaitingForCompletion", "Completed", "Failed"];

const STATUS_TEXT = { CompletedWithErrors: "Completed with errors" };

/** An operation status, always as text (colour only repeats it). */
export function StatusText({ status }) {
  const tone = String(status ?? "").toLowerCase();
  return html`<span class=${`status status-${tone}`}>${STATUS_TEXT[status] ?? status}</span>`;
}

/** A progress bar with its percentage as text. */
export function ProgressBar({ processed, total, label }) {
  const value = percent(processed, total);
  return html`<div class="progress">
    <div
      class="progress-track"
      role="progressbar"
      aria-label=${label}
      aria-valuemin="0"
      aria-valuemax="100"
      aria-valuenow=${value}
      aria-valuetext=${`${value}% (${processed} of ${total} rows)`}
    >
      <div class="progress-fill" style=${{ width: `${value}%` }}></div>
    </div>
    <span class="progress-text">${value}%</span>
  </div>`;
}

/** Previous/next paging for a paged envelope; `what` names the items ("operations"). */
export function Pager({ page, onPage, what }) {
  if (!page) return null;
  const pages = Math.max(1, Math.ceil(page.totalCount / page.pageSize));
  return html`<nav class="pager" aria-label=${`Pages of ${what}`}>
    <button type="button" disabled=${page.page <= 1} onClick=${() => onPage(page.page - 1)}
      aria-label=${`Previous page of ${what}`}>Previous</button>
    <span>Page ${page.page} of ${pages} (${page.totalCount} ${what})</span>
    <button type="button" disabled=${!page.hasNextPage} onClick=${() => onPage(page.page + 1)}
      aria-label=${`Next page of ${what}`}>Next</button>
  </nav>`;
}

/** An error message box (role=alert, so it is announced). */
export function ErrorMessage({ error, prefix }) {
  if (!error) return null;
  const text = error.message ?? String(error);
  return html`<p class="alert alert-error" role="alert">${prefix ? `${prefix}: ` : ""}${text}</p>`;
}

/** A button that downloads an API file with the token; shows the server's refusal. */
export function DownloadButton({ path, query, children, label }) {
  const [state, setState] = useState({ busy: false, error: null, saved: "" });
  const click = async () => {
    setState({ busy: true, error: null, saved: "" });
    try {
      const saved = await download(path, query);
      setState({ busy: false, error: null, saved });
    } catch (error) {
      setState({ busy: false, error, saved: "" });
    }
  };
  return html`<span class="download">
    <button type="button" onClick=${click} disabled=${state.busy} aria-label=${label}>${children}</button>
    ${state.saved && html`<span class="hint" role="status">Saved ${state.saved}</span>`}
    ${state.error && html`<span class="alert-inline" role="alert">${state.error.message}</span>`}
  </span>`;
}

/** A table that scrolls sideways on narrow screens instead of widening the page. */
export function TableBox({ label, children }) {
  return html`<div class="table-box" role="region" aria-label=${label} tabindex="0">${children}</div>`;
}

/** Why a control that changes something is disabled for a read-only token (or null). */
export function ReadOnlyNote({ reason }) {
  if (!reason) return null;
  return html`<p class="alert alert-info">Read-only access: ${reason}. Buttons that change
    operations are disabled; use a token with operate rights to change them.</p>`;
}
