// The dashboard's shell: header and navigation, the access-token panel, and the page that
// the URL names.
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { setToken, useAccess } from "./access.js";
import { get } from "./api.js";
import { html } from "./html.js";
import { CreatePage } from "./pages/create.js";
import { EventsPage } from "./pages/events.js";
import { ListPage } from "./pages/list.js";
import { OperationPage } from "./pages/operation.js";
import { UsagePage } from "./pages/usage.js";
import { Link, paths, useRoute } from "./router.js";

const PAGES = {
  list: { title: "Operations", view: ListPage },
  create: { title: "New operation", view: CreatePage },
  operation: { title: "Operation", view: OperationPage },
  events: { title: "Events", view: EventsPage },
  usage: { title: "Usage", view: UsagePage },
};

/** Asks for a bearer token when the API answered 401; shows the token in use otherwise. */
function AccessPanel() {
  const access = useAccess();
  const [draft, setDraft] = useState("");
  const submit = (event) => {
    event.preventDefault();
    setToken(draft);
    setDraft("");
  };
  if (access.needed) {
    return html`<form class="access" onSubmit=${submit} aria-labelledby="access-title">
      <p id="access-title">
        <strong>${access.refused ? "The service refused this access token." : "This service needs an access token."}</strong>
        ${" "}It is kept in this browser tab only and sent as a bearer token.
      </p>
      <label for="access-token">Access token</label>
      <input id="access-token" type="password" autocomplete="off" value=${draft}
        onInput=${(e) => setDraft(e.currentTarget.value)} required />
      <button type="submit">Use token</button>
    </form>`;
  }
  if (!access.token) return null;
  return html`<div class="access access-set">
    <span>Using an access token${access.readOnly ? " (read-only)" : ""}.</span>
    <button type="button" onClick=${() => setToken("")}>Forget access token</button>
  </div>`;
}

/**
 * Who the service takes the dashboard for (GET /api/me): the caller's name and tenant. A
 * caller with a tenant sees only that tenant's operations, and the page says so.
 */
function Caller() {
  const access = useAccess();
  const [caller, setCaller] = useState(null);
  useEffect(() => {
    let current = true;
    get("/api/me")
      .then((body) => current && setCaller(body))
      .catch(() => current && setCaller(null)); // 401: the access panel asks for a token
    return () => {
      current = false;
    };
  }, [access.version]);
  if (!caller || (!caller.name && !caller.tenant)) return null;
  return html`<p class="caller" aria-label="Signed in">
    ${caller.name && html`<span>Signed in as <strong>${caller.name}</strong></span>`}
    ${caller.tenant &&
    html`<span>${caller.name ? " · " : ""}Tenant <strong class="tenant">${caller.tenant}</strong>
      <span class="hint"> (you see this tenant's operations only)</span></span>`}
  </p>`;
}

function Missing() {
  return html`<section><h1 tabindex="-1">Page not found</h1>
    <p>There is no such dashboard page. <${Link} href=${paths.list()}>See all operations</${Link}>.</p>
  </section>`;
}

function App() {
  const route = useRoute();
  const page = PAGES[route.name];
  const main = useRef(null);
  const first = useRef(true);
  useEffect(() => {
    document.title = `${page?.title ?? "Not found"} - bulkops`;
    // Move focus to the new page's heading so keyboard and screen-reader users start there.
    if (first.current) first.current = false;
    else main.current?.querySelector("h1")?.focus();
  }, [route.name, route.id]);
  const View = page?.view ?? Missing;
  const current = (name) => (route.name === name ? "page" : undefined);
  return html`
    <a class="skip" href="#main">Skip to content</a>
    <header class="top">
      <${Link} class="brand" href=${paths.list()}>bulkops</${Link}>
      <nav aria-label="Dashboard">
        <${Link} href=${paths.list()} aria-current=${current("list")}>Operations</${Link}>
        <${Link} href=${paths.create()} aria-current=${current("create")}>New operation</${Link}>
        <${Link} href=${paths.events()} aria-current=${current("events")}>Events</${Link}>
        <${Link} href=${paths.usage()} aria-current=${current("usage")}>Usage</${Link}>
      </nav>
      <${Caller} />
    </header>
    <${AccessPanel} />
    <main id="main" ref=${main}>
      <${View} key=${`${route.name}:${route.id ?? ""}`} route=${route} />
    </main>`;
}

render(html`<${App} />`, document.getElementById("app"));
