// The registered operations (GET /api/operations), fetched once per token and shared by
// every page that needs names, descriptions, columns or metadata fields.
import { useAccess } from "./access.js";
import { get } from "./api.js";
import { useLoad } from "./hooks.js";

let cached = { version: -1, promise: null };

/** The operation descriptors, loaded once for the current access token. */
export function loadCatalog(version) {
  if (cached.version !== version || !cached.promise) {
    const promise = get("/api/operations").catch((error) => {
      cached = { version: -1, promise: null }; // try again next time
      throw error;
    });
    cached = { version, promise };
  }
  return cached.promise;
}

/** A hook: [{data: descriptors, error, loading}]. */
export function useCatalog() {
  const { version } = useAccess();
  return useLoad(() => loadCatalog(version), []);
}
