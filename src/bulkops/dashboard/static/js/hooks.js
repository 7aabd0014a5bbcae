// Loading data from the API into a view, once or on a timer (live views poll every 2 s, as
// the API suggests, and stop when told to, e.g. at a terminal status).
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { useAccess } from "./access.js";

/** How often live views poll the API, in milliseconds. */
export const POLL_MS = 2000;

/**
 * Run `load` when `deps` change (and when the access token changes), and every `every` ms
 * while `live` is true. Returns [{data, error, loading, loads}, reload]; `loads` counts the
 * successful loads, so views that follow this one can reload with it.
 */
export function useLoad(load, deps, { every = 0, live = true } = {}) {
  const { version } = useAccess();
  const [state, setState] = useState({ data: undefined, error: null, loading: true, loads: 0 });
  const [round, setRound] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const liveRef = useRef(live);
  liveRef.current = live;

  useEffect(() => {
    let stopped = false;
    let timer;
    const run = async () => {
      try {
        const data = await loadRef.current();
        if (!stopped) setState((old) => ({ data, error: null, loading: false, loads: old.loads + 1 }));
      } catch (error) {
        if (!stopped) setState((old) => ({ ...old, error, loading: false }));
        if (error?.status === 401) return; // wait for a token instead of polling
      }
      if (!stopped && every) timer = setTimeout(() => liveRef.current && run(), every);
    };
    run();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [...deps, version, round, every]);

  // Polling switched back on: load now, and the timer goes on from there.
  const wasLive = useRef(live);
  useEffect(() => {
    if (live && !wasLive.current) setRound((n) => n + 1);
    wasLive.current = live;
  }, [live]);

  const reload = useCallback(() => setRound((n) => n + 1), []);
  return [state, reload];
}

/**
 * Run an action (a click on a mutating button) and keep its outcome:
 * returns [run, {busy, error, result}, clear].
 */
export function useAction(action) {
  const [state, setState] = useState({ busy: false, error: null, result: undefined });
  const run = useCallback(
    async (...args) => {
      setState({ busy: true, error: null, result: undefined });
      try {
        const result = await action(...args);
        setState({ busy: false, error: null, result });
        return result;
      } catch (error) {
        setState({ busy: false, error, result: undefined });
        return undefined;
      }
    },
    [action],
  );
  const clear = useCallback(() => setState({ busy: false, error: null, result: undefined }), []);
  return [run, state, clear];
}

/** A counter that goes up every `ms` milliseconds while `active` (drives live feeds). */
export function useTicker(ms, active = true) {
  const [tick, setTick] = useState(0);
  useEffect(() => {
    if (!active) return undefined;
    const timer = setInterval(() => setTick((n) => n + 1), ms);
    return () => clearInterval(timer);
  }, [ms, active]);
  return tick;
}
