// Who the dashboard is to the API: the bearer token, kept in this tab's session storage only
// (never in local storage or a cookie), and what the API said about it: 401 means a token is
// needed (or the one given was refused); 403 on a change means the token may only read.
import { useEffect, useState } from "preact/hooks";

const TOKEN_KEY = "bulkops.token";
const READ_ONLY_KEY = "bulkops.readOnly";

const listeners = new Set();
let state = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  needed: false, // the API answered 401
  refused: false, // ... although a token was sent
  readOnly: sessionStorage.getItem(READ_ONLY_KEY) || "", // why the API refused a change
  version: 0, // bumps when the token changes, so every view loads again with it
};

function update(changes) {
  state = { ...state, ...changes };
  for (const listener of listeners) listener(state);
}

/** The current access state (token, needed, refused, readOnly, version). */
export function accessState() {
  return state;
}

/** Use `token` from now on (an empty string forgets it); views reload. */
export function setToken(token) {
  const value = token.trim();
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(READ_ONLY_KEY);
  update({ token: value, needed: false, refused: false, readOnly: "", version: state.version + 1 });
}

/** Record that the API answered 401. */
export function markUnauthorized() {
  if (!state.needed) update({ needed: true, refused: Boolean(state.token) });
}

/** Record that the API refused a change with 403, and why; kept for this tab's session. */
export function markReadOnly(reason) {
  sessionStorage.setItem(READ_ONLY_KEY, reason);
  if (state.readOnly !== reason) update({ readOnly: reason });
}

/** A hook: the access state, re-rendering on every change. */
export function useAccess() {
  const [current, setCurrent] = useState(state);
  useEffect(() => {
    listeners.add(setCurrent);
    setCurrent(state);
    return () => {
      listeners.delete(setCurrent);
    };
  }, []);
  return current;
}
