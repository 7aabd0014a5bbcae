// Text for numbers, times, sizes and durations, the same on every page.

const numbers = new Intl.NumberFormat("en");
const pad = (n) => String(n).padStart(2, "0");

/** 12,345 */
export function count(n) {
  return n === undefined || n === null ? "" : numbers.format(n);
}

/** A timestamp in the browser's time zone: 2026-11-23 14:05:09. */
export function time(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

/** How long from `start` to `end` (or now): "3 min 05 s", "820 ms". */
export function duration(start, end) {
  if (!start) return "";
  const ms = (end ? new Date(end) : new Date()) - new Date(start);
  if (!Number.isFinite(ms) || ms < 0) return "";
  if (ms < 1000) return `${ms} ms`;
  const seconds = Math.floor(ms / 1000);
  if (seconds < 60) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${pad(seconds % 60)} s`;
  return `${Math.floor(minutes / 60)} h ${pad(minutes % 60)} min`;
}

/** 1.5 MB */
export function bytes(n) {
  if (n === undefined || n === null) return "";
  const units = ["bytes", "KB", "MB", "GB", "TB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} bytes` : `${value.toFixed(1)} ${units[unit]}`;
}

/** Whole-number progress, as the API computes it: floor(processed * 100 / total). */
export function percent(processed, total) {
  return total > 0 ? Math.floor((processed * 100) / total) : 0;
}

/** A row's state or an error type in words: "WaitingForCompletion" -> "Waiting for completion". */
export function words(name) {
  if (!name) return "";
  const spaced = name.replace(/([a-z])([A-Z])/g, "$1 $2");
  return spaced.charAt(0) + spaced.slice(1).toLowerCase();
}
