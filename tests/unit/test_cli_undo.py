"""``bulkops undo`` against a fake service: the request, the preview, --wait's exit code."""

from __future__ import annotations

import json

import httpx

from tests.unit.test_cli_client import NEW, OP, Service, bulkops, detail, service

__all__ = ["service"]  # the fixture, used by name


def test_undo_prints_the_new_operation_and_preview_counts(service: Service) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content or b"{}").get("preview"):
            return httpx.Response(200, json={"rows": 7, "steps": 12})
        return httpx.Response(201, json=detail(id=NEW, status="Pending", undoOf=OP))

    service.on("POST", f"/api/bulks/{OP}/undo", answer)
    previewed = bulkops("undo", OP, "--preview")
    assert previewed.exit_code == 0, previewed.output
    assert previewed.output.strip() == "7 rows, 12 steps to undo"
    made = bulkops("undo", OP)
    assert made.exit_code == 0, made.output
    assert made.output.strip() == NEW
    as_json = bulkops("undo", OP, "--json")
    assert json.loads(as_json.output)["undoOf"] == OP


def test_undo_wait_exits_as_submit_wait_and_refusals_exit_2(service: Service) -> None:
    service.on("POST", f"/api/bulks/{OP}/undo", detail(id=NEW, undoOf=OP), status=201)
    status = {
        "status": "CompletedWithErrors",
        "progress": 100,
        "totalRows": 3,
        "processedRows": 3,
        "successfulRows": 2,
        "errorCount": 1,
    }
    service.on("GET", f"/api/bulks/{NEW}/status", status)
    service.on("GET", f"/api/bulks/{NEW}", detail(id=NEW, undoOf=OP))
    waited = bulkops("undo", OP, "--wait", "--poll-interval", "0.05")
    assert waited.exit_code == 3, waited.output
    assert NEW in waited.output

    reason = "Operation is Running; only a finished operation can be undone"
    service.on(
        "POST",
        f"/api/bulks/{OP}/undo",
        {"error": f"Cannot undo operation: {reason}", "reason": reason},
        status=409,
    )
    refused = bulkops("undo", OP)
    assert refused.exit_code == 2
    assert "only a finished operation" in refused.output
