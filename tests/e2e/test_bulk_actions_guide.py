"""The samples of the guide "Act on many operations" (docs/guides/bulk-actions.md) run
against a real service: every ``bulkops`` command of its shell blocks, and its Python."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Process, serve, wait_for, wait_terminal

pytestmark = pytest.mark.one_core

GUIDE = Path(__file__).parents[2] / "docs" / "guides" / "bulk-actions.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(), re.S)


def commands() -> list[str]:
    """Each command of the shell blocks, continuation lines joined, output left out."""
    found = []
    for block in blocks("sh"):
        joined = block.replace("\\\n", " ")
        found.extend(line for line in joined.splitlines() if line.startswith("bulkops "))
    return found


def test_the_guides_commands_and_python_run(spawn: Callable[..., Process], tmp_path: Path) -> None:
    _, url = serve(spawn)
    failing = httpx.post(
        f"{url}/api/bulks",
        data={"operationName": "import-users", "metadata": json.dumps({"requestedBy": "me"})},
        files={"file": ("users.csv", b"name,email\nAnn,ann@blocked.example\n", "text/csv")},
    ).json()["operationId"]
    assert wait_terminal(url, failing)["status"] == "CompletedWithErrors"
    onboarding = httpx.post(
        f"{url}/api/bulks",
        data={"operationName": "onboard-employees", "metadata": json.dumps({"requestedBy": "me"})},
        files={"file": ("new.csv", b"name,email,manager\nBo,bo@example.com,mia\n", "text/csv")},
    ).json()["operationId"]

    def signalled() -> bool:
        return httpx.post(f"{url}/api/bulks/{onboarding}/signal/mia").status_code == 200

    wait_for(signalled, what="the approval to be asked")
    assert wait_terminal(url, onboarding)["status"] == "Completed"

    env = {**os.environ, "BULKOPS_URL": url}
    ran = commands()
    assert len(ran) == 4
    for line in ran:
        args = shlex.split(line.replace("$ID", onboarding))[1:]
        done = subprocess.run(
            [sys.executable, "-m", "bulkops", *args], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        if args[0] == "retry":
            assert "1 rows submitted, 0 skipped" in done.stdout
    assert wait_terminal(url, onboarding)["status"] == "Completed"

    [python] = blocks("python")
    script = tmp_path / "sample.py"
    script.write_text(python.replace("http://127.0.0.1:8000", url))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "1 operations match" in done.stdout
    assert "1 retried; []" in done.stdout
