// The one way the dashboard talks to the service: the public HTTP API under the same prefix
// as the page, with the bearer token when one is set. Errors become ApiError with the
// server's `{"error": ...}` message.
import { accessState, markReadOnly, markUnauthorized } from "./access.js";

/** The URL prefix the service is mounted under ("" at the root of its origin). */
export const base = document.querySelector('meta[name="bulkops-base"]')?.content ?? "";

/** An HTTP answer the dashboard did not expect, with the server's message. */
export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.body = body;
  }
}

function buildUrl(path, query) {
  const url = new URL(base + path, location.origin);
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
  }
  return url;
}

async function send(method, path, { query, json, form, headers } = {}) {
  const sent = { Accept: "application/json", ...headers };
  const { token } = accessState();
  if (token) sent.Authorization = `Bearer ${token}`;
  let body;
  if (json !== undefined) {
    sent["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  } else if (form) {
    body = form; // the browser writes the multipart boundary itself
  }
  try {
    return await fetch(buildUrl(path, query), { method, headers: sent, body });
  } catch {
    throw new ApiError(0, "The service cannot be reached. Is it running?", null);
  }
}

async function readBody(response) {
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function failure(method, response, body) {
  const message =
    (body && typeof body === "object" && typeof body.error === "string" && body.error) ||
    `${response.status} ${response.statusText}`.trim();
  if (response.status === 401) {
    markUnauthorized();
    const { token } = accessState();
    return new ApiError(401, token ? "The service refused the access token." : "The service needs an access token.", body);
  }
  if (response.status === 403 && method !== "GET") {
    markReadOnly(`the service refused a change (403: ${message})`);
  }
  return new ApiError(response.status, message, body);
}

/**
 * Send a request; resolves to {status, body, headers} for a 2xx answer or a status listed in
 * `accept`, else rejects with ApiError.
 */
export async function request(method, path, options = {}) {
  const response = await send(method, path, options);
  const body = await readBody(response);
  if (response.ok || (options.accept ?? []).includes(response.status)) {
    return { status: response.status, body, headers: response.headers };
  }
  throw failure(method, response, body);
}

/** GET a JSON body. */
export async function get(path, query) {
  return (await request("GET", path, { query })).body;
}

/** POST and return the JSON body of the answer. */
export async function post(path, options = {}) {
  return (await request("POST", path, options)).body;
}

function fileName(disposition) {
  if (!disposition) return null;
  const encoded = /filename\*\s*=\s*UTF-8''([^;]+)/i.exec(disposition);
  if (encoded) return decodeURIComponent(encoded[1]);
  const plain = /filename\s*=\s*"([^"]*)"/i.exec(disposition) ?? /filename\s*=\s*([^;]+)/i.exec(disposition);
  return plain ? plain[1].trim() : null;
}

/**
 * Download a file the API serves and save it under the name in its Content-Disposition.
 * Fetched (rather than followed as a link) so the token is sent and errors can be shown.
 */
export async function download(path, query) {
  const response = await send("GET", path, { query, headers: { Accept: "*/*" } });
  if (!response.ok) throw failure("GET", response, await readBody(response));
  const blob = await response.blob();
  const name = fileName(response.headers.get("Content-Disposition")) ?? "download";
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = name;
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
  return name;
}

/** The URL of an API path with query parameters (for plain links). */
export function apiUrl(path, query) {
  const url = buildUrl(path, query);
  return url.pathname + url.search;
}
