"""``bulkops act`` and ``bulkops retry --from-step`` against a fake service: the requests
they send, what they print, their exit codes."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.unit.test_cli_client import OP, Service, bulkops, service

__all__ = ["service"]  # the fixture, used here

ACTION = "5d1c7e2a-0b3f-4a6d-9e8c-7f6a5b4c3d2e"


def action(**overrides: Any) -> dict[str, Any]:
    body = {
        "id": ACTION,
        "action": "retry",
        "filter": {"status": ["CompletedWithErrors"]},
        "includeCompleted": False,
        "status": "Running",
        "matched": 2,
        "done": 0,
        "skipped": 0,
        "failed": 0,
        "createdBy": "alice",
        "createdAt": "2026-11-28T10:00:00Z",
    }
    body.update(overrides)
    return body


def test_act_sends_the_filter_and_prints_the_action(service: Service) -> None:
    service.on("POST", "/api/actions", action(), status=202)
    result = bulkops(
        "act",
        "retry",
        "--status",
        "CompletedWithErrors,Failed",
        "--status",
        "Cancelled",
        "--operation",
        "import-users",
        "--created-by",
        "alice",
        "--since",
        "2026-11-01T00:00:00Z",
        "--until",
        "2026-11-28T00:00:00Z",
        "--id",
        OP,
        "--reason",
        "API down",
    )
    assert result.exit_code == 0, result.output
    [sent] = service.requests("POST", "/api/actions")
    assert json.loads(sent.content) == {
        "action": "retry",
        "filter": {
            "ids": [OP],
            "operationName": "import-users",
            "status": ["CompletedWithErrors", "Failed", "Cancelled"],
            "createdBy": "alice",
            "from": "2026-11-01T00:00:00Z",
            "to": "2026-11-28T00:00:00Z",
        },
        "reason": "API down",
    }
    assert f"Action {ACTION} (retry) started on 2 operations" in result.stdout


def test_act_preview_and_restart_options(service: Service) -> None:
    service.on("POST", "/api/actions", {"matched": 1, "operationIds": [OP]})
    result = bulkops(
        "act",
        "restart",
        "--operation",
        "import-users",
        "--from-step",
        "Send",
        "--include-completed",
        "--preview",
    )
    assert result.exit_code == 0, result.output
    [sent] = service.requests("POST", "/api/actions")
    assert json.loads(sent.content) == {
        "action": "restart",
        "filter": {"operationName": "import-users"},
        "fromStep": "Send",
        "includeCompleted": True,
        "preview": True,
    }
    assert "1 operation matches (first 1):" in result.stdout and OP in result.stdout


def test_act_wait_follows_to_the_end_and_lists_skips(service: Service) -> None:
    service.on("POST", "/api/actions", action(), status=202)
    answers = iter(
        [
            action(done=1),
            action(
                status="Completed",
                done=1,
                failed=1,
                items=[{"operationId": OP, "outcome": "failed", "reason": "broke"}],
            ),
        ]
    )
    service.on("GET", f"/api/actions/{ACTION}", lambda _: httpx.Response(200, json=next(answers)))
    result = bulkops("act", "cancel", "--created-by", "bob", "--wait", "--poll-interval", "0.05")
    assert result.exit_code == 3, result.output
    assert "Completed: 1 done, 0 skipped, 1 failed of 2" in result.stdout
    assert f"failed {OP}: broke" in result.stdout


def test_act_without_a_filter_or_refused_sends_nothing_or_exits_2(service: Service) -> None:
    result = bulkops("act", "retry")
    assert result.exit_code == 2 and service.seen == []
    assert "at least one of" in result.stderr
    service.on("POST", "/api/actions", {"error": "fromStep applies only to ..."}, status=400)
    refused = bulkops("act", "retry", "--created-by", "bob", "--from-step", "X")
    assert refused.exit_code == 2 and "fromStep applies" in refused.stderr


def test_retry_from_a_step(service: Service) -> None:
    service.on("POST", f"/api/bulks/{OP}/retry", {"rowsSubmitted": 3, "rowsSkipped": 0})
    service.on("POST", f"/api/bulks/{OP}/retry/rows", {"rowsSubmitted": 1, "rowsSkipped": 0})
    result = bulkops("retry", OP, "--from-step", "Send welcome", "--include-completed")
    assert result.exit_code == 0, result.output
    [sent] = service.requests("POST", f"/api/bulks/{OP}/retry")
    assert json.loads(sent.content) == {"fromStep": "Send welcome", "includeCompleted": True}
    assert "3 rows submitted, 0 skipped" in result.stdout
    bulkops("retry", OP, "--rows", "2", "--from-step", "Send welcome")
    [rows] = service.requests("POST", f"/api/bulks/{OP}/retry/rows")
    assert json.loads(rows.content) == {"rowNumbers": [2], "fromStep": "Send welcome"}
    bulkops("retry", OP)
    plain = service.requests("POST", f"/api/bulks/{OP}/retry")[-1]
    assert plain.content == b""
