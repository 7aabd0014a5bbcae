// Client-side navigation inside /dashboard: real URLs (deep links work because the server
// serves the same page at each of them), history.pushState, and links that stay ordinary
// anchors (middle-click and "open in new tab" keep working).
import { useEffect, useState } from "preact/hooks";
import { base } from "./api.js";
import { html } from "./html.js";

const PREFIX = `${base}/dashboard`;

/** URLs of the dashboard's pages. */
export const paths = {
  list: (query = "") => `${PREFIX}${query ? `?${query}` : ""}`,
  operation: (id) => `${PREFIX}/bulks/${encodeURIComponent(id)}`,
  create: (name) => `${PREFIX}/new${name ? `?operation=${encodeURIComponent(name)}` : ""}`,
  events: () => `${PREFIX}/events`,
  usage: () => `${PREFIX}/usage`,
};

/** The page named by the current URL: {name, id?, query}. */
export function currentRoute() {
  const path = location.pathname.startsWith(PREFIX)
    ? location.pathname.slice(PREFIX.length)
    : location.pathname;
  const query = new URLSearchParams(location.search);
  const operation = /^\/bulks\/([^/]+)\/?$/.exec(path);
  if (operation) return { name: "operation", id: decodeURIComponent(operation[1]), query };
  if (path === "" || path === "/") return { name: "list", query };
  if (path === "/new") return { name: "create", query };
  if (path === "/events") return { name: "events", query };
  if (path === "/usage") return { name: "usage", query };
  return { name: "missing", query };
}

/** Go to a dashboard URL without reloading the page. */
export function navigate(to, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  dispatchEvent(new PopStateEvent("popstate"));
}

/** A hook: the current route, updated on navigation. */
export function useRoute() {
  const [route, setRoute] = useState(currentRoute);
  useEffect(() => {
    const changed = () => setRoute(currentRoute());
    addEventListener("popstate", changed);
    return () => removeEventListener("popstate", changed);
  }, []);
  return route;
}

/** An anchor that navigates in place on a plain click. */
export function Link({ href, children, ...rest }) {
  const click = (event) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(href);
  };
  return html`<a href=${href} onClick=${click} ...${rest}>${children}</a>`;
}
