"""Two tenants on one served instance, through the command-line client: each lists, reads and
follows only its own operations."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import Process, serve
from tests.e2e.test_cli_client import META, USERS, bulkops, write

pytestmark = pytest.mark.one_core

TOKENS = {
    "acme-token-123": {"role": "operate", "name": "alice", "tenant": "acme"},
    "globex-token-123": {"role": "operate", "name": "bob", "tenant": "globex"},
}


def test_the_cli_shows_each_tenant_its_own_operations(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    _, url = serve(spawn, auth_tokens=json.dumps(TOKENS))
    users = write(tmp_path, "users.csv", USERS)
    acme, globex = "acme-token-123", "globex-token-123"
    submit = ["submit", str(users), "--operation", "import-users", "--metadata", META]
    submitted = bulkops(url, *submit, "--wait", "--poll-interval", "0.1", token=acme)
    assert submitted.returncode == 0, submitted.stderr
    operation_id = submitted.stdout.strip().splitlines()[0]
    theirs = bulkops(url, *submit, "--wait", "--poll-interval", "0.1", token=globex)
    other_id = theirs.stdout.strip().splitlines()[0]

    status = bulkops(url, "status", operation_id, token=acme)
    assert status.returncode == 0 and "Tenant: acme" in status.stdout
    hidden = bulkops(url, "status", operation_id, token=globex)
    assert hidden.returncode == 2 and f"Operation {operation_id} not found" in hidden.stderr

    listed = bulkops(url, "list", token=acme, COLUMNS="250")  # a table wide enough
    assert operation_id in listed.stdout and other_id not in listed.stdout
    assert "acme" in listed.stdout and "globex" not in listed.stdout
    as_json = json.loads(bulkops(url, "list", "--json", token=globex).stdout)
    assert [(i["id"], i["tenant"]) for i in as_json["items"]] == [(other_id, "globex")]

    events = json.loads(bulkops(url, "events", "--json", token=globex).stdout)
    assert events and {e["operationId"] for e in events} == {other_id}
