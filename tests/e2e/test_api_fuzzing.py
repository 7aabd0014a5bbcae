"""Schemathesis against a served instance: the API does what its description says.

Every check and every phase (coverage, fuzzing, and the stateful phase that follows the
OpenAPI links from createBulk to the id routes with real ids) must find nothing. The
number of examples is bounded so both runs take about three minutes on two cores.

The runs have fixed seeds, so a finding is reproducible and a run's verdict does not change
between two CI runs of the same code. Random seeds also found Schemathesis's own false
positives on multipart forms: a form field cannot carry JSON ``null``, so the "negative"
value it sends for a string field is the valid string ``"null"``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import Process, serve

pytestmark = [pytest.mark.e2e, pytest.mark.one_core]

SCHEMATHESIS = Path(sys.executable).with_name("st")
CONFIG = Path(__file__).with_name("schemathesis.toml")
TOKEN = "fuzzing-operate-token"
SEED = 20261127


def fuzz(url: str, workdir: Path, *options: str) -> str:
    """Run ``st run`` with every check against ``url``; fail with its report on any finding."""
    command = [
        str(SCHEMATHESIS),
        "--no-color",
        "--config-file",
        str(CONFIG),
        "run",
        f"{url}/openapi/v1.json",
        "--checks",
        "all",
        "--seed",
        str(SEED),
        *options,
    ]
    # Its caches and reports land in the test's own directory, not in the repository.
    result = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=480)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-30000:]
    return report


def created(process: Process) -> int:
    """How many creates the server answered with 201 (from its access log)."""
    return process.output().count('"POST /api/bulks HTTP/1.1" 201')


@pytest.mark.timeout(600)
def test_open_instance_matches_its_description(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    process, url = serve(spawn, operations="bulkops.examples.operations")
    report = fuzz(url, tmp_path, "--max-examples", "10")
    for phase in ("Coverage", "Fuzzing", "Stateful"):
        assert f"✅ {phase}" in report, report[-5000:]
    # Generated submissions were accepted, so the stateful phase had real ids to follow.
    assert created(process) > 0


@pytest.mark.timeout(600)
def test_secured_instance_matches_its_description(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    process, url = serve(
        spawn,
        operations="bulkops.examples.operations",
        auth_tokens=json.dumps({TOKEN: "operate"}),
    )
    # ignored_auth replays requests without the credential and expects 401.
    report = fuzz(
        url,
        tmp_path,
        "--max-examples",
        "4",
        "--phases",
        "fuzzing,stateful",
        "--header",
        f"Authorization: Bearer {TOKEN}",
    )
    assert "✅ Stateful" in report, report[-5000:]
    assert created(process) > 0
    assert '" 401' in process.output()  # the replays without a credential were refused
