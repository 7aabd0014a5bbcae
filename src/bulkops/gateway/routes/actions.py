"""Bulk actions through a gateway: ``/api/actions`` over every backend.

An action acts on the operations of the service that stores it, so the gateway sends a new
action to every backend: each runs its own action, with its own id, on its own matching
operations. The answer is the action of the backend that matched the most (the first on a
tie), with ``actions``: every backend's action, each with ``backend`` (its name), and
``unavailableBackends`` naming those that did not answer (none acted there). Every one
of those ids is routable: ``GET /api/actions/{id}`` and its cancel go to the backend that
stores it (the id cache first, else every backend is asked), like an operation's routes.
A preview adds the backends' ``matched`` up and lists the first 25 ids of them all.
``GET /api/actions`` merges every backend's actions newest first.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from bulkops.errors import BadRequest, NotFound
from bulkops.gateway.backend import Backend, BackendFailure
from bulkops.gateway.errors import BackendUnavailable, Refusal, RelayedRefusal
from bulkops.gateway.fanout import Answer, fan_out, first_match
from bulkops.gateway.forwarding import relay, until_disconnect
from bulkops.gateway.gateway import Gateway, gateway_of
from bulkops.gateway.merge import merge_newest_first, page_of
from bulkops.gateway.routes.forwarded import _small_body

router = APIRouter(include_in_schema=False)

PATH = "/api/actions"
PREVIEW_IDS = 25  # operation ids a preview lists, as an instance's
MAX_PAGE_SIZE = 1000  # the most actions an instance lists per page
DEFAULT_PAGE_SIZE = 25

Reply = tuple[int, Any]


def _body(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return {"error": response.text}


def _outcome(answers: list[Answer[Reply]], what: str) -> list[tuple[Backend, Any]]:
    """The backends' accepting answers (2xx), or the refusal to relay, or 503."""
    accepted = [
        (a.backend, a.value[1]) for a in answers if a.value is not None and a.value[0] < 300
    ]
    if accepted:
        return accepted
    for answer in answers:
        if answer.value is not None:
            raise RelayedRefusal(Refusal(*answer.value))
    failures = "; ".join(a.failure or "" for a in answers) or "none configured"
    raise BackendUnavailable(f"No backend answered the {what}: {failures}")


@router.post(PATH)
async def create_action(request: Request) -> JSONResponse:
    """A bulk action sent to every backend (see the module's description)."""
    gateway = gateway_of(request)
    headers = gateway.headers_for(request)
    content = await _small_body(request)

    async def post(backend: Backend) -> Reply:
        outgoing = backend.request(
            "POST", PATH, headers=headers, params=dict(request.query_params), content=content
        )
        response = await backend.send(outgoing)
        if response.status_code >= 500:
            raise BackendFailure(backend.name, f"answered {response.status_code}")
        return response.status_code, _body(response)

    answers = await until_disconnect(
        request, fan_out(list(gateway.backends.values()), post, _timeout(gateway))
    )
    accepted = _outcome(answers, "action")
    if all("operationIds" in body for _, body in accepted):  # previews
        ids = [i for _, body in accepted for i in body.get("operationIds", [])]
        merged = {**accepted[0][1], "matched": sum(b.get("matched", 0) for _, b in accepted)}
        return JSONResponse({**merged, "operationIds": ids[:PREVIEW_IDS]})
    for backend, body in accepted:
        gateway.cache.put(str(body["id"]).lower(), backend.name)
    chosen = max(accepted, key=lambda pair: pair[1].get("matched", 0))[1]
    every = [{**body, "backend": backend.name} for backend, body in accepted]
    answer = {**chosen, "actions": every}
    missed = sorted(a.backend.name for a in answers if not a.ok)
    if missed:  # their operations were not acted on: the caller may send it again there
        answer["unavailableBackends"] = missed
    location = {"Location": f"{PATH}/{chosen['id']}"}
    return JSONResponse(answer, status_code=202, headers=location)


@router.get(PATH)
async def get_actions(request: Request) -> JSONResponse:
    """Every backend's actions merged newest first, in the paged envelope."""
    gateway = gateway_of(request)
    headers = gateway.headers_for(request)
    page, size = _paging(request)
    params = [("page", "1"), ("pageSize", str(min(page * size, MAX_PAGE_SIZE)))]

    async def listing(backend: Backend) -> Reply:
        return await backend.get_json(PATH, params=params, headers=headers)

    answers = await until_disconnect(
        request, fan_out(list(gateway.backends.values()), listing, _timeout(gateway))
    )
    accepted = _outcome(answers, "action list")
    for backend, body in accepted:
        for item in body.get("items", []):
            gateway.cache.put(str(item["id"]).lower(), backend.name)
    total = sum(int(body.get("totalCount", 0)) for _, body in accepted)
    items = page_of(merge_newest_first([b.get("items", []) for _, b in accepted]), page, size)
    return JSONResponse(
        {
            "items": items,
            "totalCount": total,
            "page": page,
            "pageSize": size,
            "hasNextPage": page * size < total,
        }
    )


@router.get(PATH + "/{id}")
async def get_action(request: Request) -> Response:
    """One action, from the backend that stores it."""
    return await _forward(request, "GET")


@router.post(PATH + "/{id}/cancel")
async def cancel_action(request: Request) -> Response:
    """Cancel an action, at the backend that stores it."""
    return await _forward(request, "POST")


async def _forward(request: Request, method: str) -> Response:
    gateway = gateway_of(request)
    headers = gateway.headers_for(request)
    action_id = str(request.path_params["id"]).lower()
    content = await _small_body(request)
    owner = await until_disconnect(request, _owner(gateway, action_id, headers))
    target = request.url.path
    outgoing = owner.request(method, target, headers=headers, content=content or None)
    return await relay(await until_disconnect(request, owner.send(outgoing, stream=True)))


async def _owner(gateway: Gateway, action_id: str, headers: list[tuple[str, str]]) -> Backend:
    """The backend that stores the action: cached, else the first that knows it."""
    cached = gateway.cache.get(action_id)
    if cached is not None and (found := gateway.backend_named(cached)) is not None:
        return found

    async def probe(backend: Backend) -> Reply:
        return await backend.get_json(f"{PATH}/{action_id}", headers=headers)

    winner, answers = await first_match(
        list(gateway.backends.values()),
        probe,
        _timeout(gateway),
        accept=lambda answer: answer[0] == 200,
    )
    if winner is not None:
        gateway.cache.put(action_id, winner.backend.name)
        return winner.backend
    for answer in answers:
        if answer.value is not None and answer.value[0] != 404:
            raise RelayedRefusal(Refusal(*answer.value))
    if any(not answer.ok for answer in answers):
        raise BackendUnavailable(f"Action {action_id} was not found on the backends that answered")
    raise NotFound(f"Action {action_id} not found")


def _paging(request: Request) -> tuple[int, int]:
    """Page (at least 1) and page size (1..1000, default 25), clamped as an instance does."""
    try:
        page = int(request.query_params.get("page", "1"))
        size = int(request.query_params.get("pageSize", str(DEFAULT_PAGE_SIZE)))
    except ValueError:
        raise BadRequest("page and pageSize must be integers") from None
    return max(page, 1), min(max(size, 1), MAX_PAGE_SIZE)


def _timeout(gateway: Gateway) -> float:
    return gateway.settings.fan_out_timeout_per_backend
