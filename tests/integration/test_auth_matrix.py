"""Every route of the app against the read/operate matrix, derived from the app itself so a
new route cannot escape it."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Iterator

import httpx
from starlette.routing import BaseRoute, Mount, Route

from bulkops.api.auth.middleware import OPERATE_READS
from tests.integration.auth_support import OPERATE_TOKEN, READ_TOKEN, bearer
from tests.integration.conftest import ClientFactory

# The only routes that never ask for a credential (DECISIONS: health never asks; the API
# description and its docs stay open).
OPEN_ROUTES = {
    ("GET", "/health/live"),
    ("GET", "/health/ready"),
    ("GET", "/openapi/v1.json"),
    ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"),
    # The dashboard's page and files hold no data: everything it shows comes from the API,
    # which asks the browser for a token.
    ("GET", "/"),
    ("GET", "/dashboard"),
    ("GET", "/dashboard/"),
    ("GET", "/dashboard/new"),
    ("GET", "/dashboard/events"),
    ("GET", "/dashboard/usage"),
    ("GET", "/dashboard/bulks/{id}"),
    ("GET", "/dashboard/assets/{name}"),
}
SAFE = {"GET", "HEAD", "OPTIONS"}


def concrete(path_format: str) -> str:
    """A requestable path: every ``{param}`` filled in."""
    values = {"id": str(uuid.uuid4()), "name": "record", "key": "some-key"}
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "x"), path_format)


def flat(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """Every route, including those of included routers (recent FastAPI keeps them behind
    one entry per ``include_router``)."""
    for route in routes:
        contexts = getattr(route, "effective_route_contexts", None)
        if contexts is not None:
            yield from (context.original_route for context in contexts())
        else:
            yield route


def routes_of(client: httpx.AsyncClient) -> list[tuple[str, str]]:
    """(method, path) of every route the app serves."""
    app = client._transport.app  # type: ignore[attr-defined]
    found = []
    for route in flat(app.routes):
        if isinstance(route, Route) and route.methods:
            found += [(method, route.path_format) for method in sorted(route.methods)]
        elif isinstance(route, Mount):
            found.append(("GET", route.path + "/"))
    return found


async def test_every_route_is_guarded_by_read_or_operate(make_client: ClientFactory) -> None:
    tokens = {READ_TOKEN: "read", OPERATE_TOKEN: "operate"}
    client = await make_client(auth_tokens=json.dumps(tokens))
    routes = routes_of(client)
    assert sum(path.startswith("/api/") for _, path in routes) >= 20  # the whole API
    open_found = set()
    for method, path_format in routes:
        path = concrete(path_format)
        anonymous = await client.request(method, path)
        if (method.replace("HEAD", "GET"), path_format) in OPEN_ROUTES:
            open_found.add((method, path_format))
            assert anonymous.status_code not in (401, 403), (method, path_format)
            continue
        assert anonymous.status_code == 401, (method, path_format)
        as_reader = await client.request(method, path, headers=bearer(READ_TOKEN))
        if method in SAFE and path_format not in OPERATE_READS:
            assert as_reader.status_code not in (401, 403), (method, path_format)
        else:
            assert as_reader.status_code == 403, (method, path_format)
        as_operator = await client.request(method, path, headers=bearer(OPERATE_TOKEN))
        assert as_operator.status_code not in (401, 403), (method, path_format)
    # Nothing else is open, and the open routes all exist.
    assert {(m.replace("HEAD", "GET"), p) for m, p in open_found} == OPEN_ROUTES


async def test_unknown_paths_and_methods_are_guarded_too(make_client: ClientFactory) -> None:
    client = await make_client(auth_tokens=json.dumps({READ_TOKEN: "read"}))
    # A route added later (e.g. GET /stats) is a read; any other verb an operation.
    assert (await client.get("/stats")).status_code == 401
    assert (await client.get("/stats", headers=bearer(READ_TOKEN))).status_code == 404
    assert (await client.delete("/api/bulks", headers=bearer(READ_TOKEN))).status_code == 403
