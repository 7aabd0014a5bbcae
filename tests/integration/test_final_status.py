"""Final means final: a cancel under load, then the operation read again once the engine
has let go of it: counters, rows and events are those the Cancelled status reported."""

from __future__ import annotations

from typing import Any

import httpx

from tests.integration.conftest import create_ok, runtime_of, wait_until

ROWS = 40_000


def _file() -> str:
    # Fast rows, one in 50 failing (a RowFailed event each), so every kind of write shows.
    lines = ["name,email"]
    lines += [f"{'boom' if n % 50 == 0 else f'r{n}'},r{n}@x.io" for n in range(1, ROWS + 1)]
    return "\n".join(lines) + "\n"


async def _events(client: httpx.AsyncClient, operation_id: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    since: int | None = None
    while True:
        params: dict[str, Any] = {"limit": 1000}
        if since is not None:
            params["since"] = since
        page = (await client.get(f"/api/bulks/{operation_id}/events", params=params)).json()
        if not page:
            return found
        found += [(event["sequence"], event["type"]) for event in page]
        since = page[-1]["sequence"]


async def _snapshot(client: httpx.AsyncClient, operation_id: str) -> dict[str, Any]:
    status = (await client.get(f"/api/bulks/{operation_id}")).json()
    report = await client.get(f"/api/bulks/{operation_id}/export", params={"format": "jsonl"})
    return {
        "status": status["status"],
        "counters": (status["processedRows"], status["successfulRows"], status["errorCount"]),
        "rows": len(report.text.splitlines()),
        "events": await _events(client, operation_id),
    }


async def _idle(client: httpx.AsyncClient) -> bool:
    return not runtime_of(client).scheduler.active


async def test_a_cancel_under_load_is_final(client: httpx.AsyncClient) -> None:
    operation_id = await create_ok(client, _file())

    async def under_way() -> bool:
        status = (await client.get(f"/api/bulks/{operation_id}/status")).json()
        return bool(status["processedRows"] >= 500)

    await wait_until(under_way, timeout=60, what="rows to be processed")
    response = await client.post(f"/api/bulks/{operation_id}/cancel")
    assert response.status_code == 200, response.text
    answered = response.json()
    assert answered["status"] == "Cancelled"
    first = await _snapshot(client, operation_id)
    await wait_until(lambda: _idle(client), timeout=60, what="the engine to let go")
    settled = await _snapshot(client, operation_id)

    assert first["counters"][0] < ROWS  # cancelled under way, not after the last row
    # What the cancel answered is what stays: rows that finish meanwhile are not recorded.
    processed, _, failed = settled["counters"]
    assert (processed, failed) == (answered["processedRows"], answered["errorCount"])
    assert settled == first
    assert settled["rows"] == processed  # every counted row is stored, and no other
    types = [kind for _, kind in settled["events"]]
    assert types[-1] == "Cancelled" and types.count("RowFailed") == failed
