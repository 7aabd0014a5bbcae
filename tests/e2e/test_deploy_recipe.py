"""guides/deploy.md's PostgreSQL recipe, followed word for word: a fresh role and database
on the test server, the schema, an API process and two workers, a submitted file, and the
checks the recipe says to make, with their expected output.

What the test changes, and nothing more: the superuser's address (the test server's), the
role and database names (unique, dropped afterwards) and port 8000 (a free port).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.doc_samples import ROOT, blocks
from tests.e2e.test_doc_samples import SERVICE_WAIT, _free_port, _shell

PAGE = ROOT / "docs" / "guides" / "deploy.md"
MARK = "tests/e2e/test_deploy_recipe.py"
pytestmark = pytest.mark.postgres


def recipe() -> list[str]:
    """The recipe's blocks, in order."""
    found = [b.text for b in blocks(PAGE) if b.kind == "elsewhere" and b.arg == MARK]
    assert len(found) == 6, "the recipe has six steps"
    return found


def script(admin: str, name: str, port: int) -> str:
    """The recipe as one bash script, the processes of step 4 in the background."""
    server = admin.rpartition("@")[2].rpartition("/")[0]  # host:port of the test server
    parts = ["set -eo pipefail", SERVICE_WAIT, "trap bulkops_stop_services EXIT"]
    for text in recipe():
        text = (
            text.replace("postgresql://postgres@127.0.0.1:5432/postgres", admin)
            .replace("ROLE bulkops ", f"ROLE {name} ")
            .replace("DATABASE bulkops OWNER bulkops", f"DATABASE {name} OWNER {name}")
            .replace(
                "postgresql://bulkops:change-me@127.0.0.1:5432/bulkops",
                f"postgresql://{name}:change-me@{server}/{name}",
            )
            .replace(":8000", f":{port}")
        )
        if "bulkops serve" in text:
            for n, line in enumerate(text.splitlines()):
                parts += [
                    f"( {line} ) > process-{n}.log 2>&1 &",
                    'BULKOPS_SERVICES="$BULKOPS_SERVICES $!"',
                ]
            parts.append("bulkops_wait_for_service")
        else:
            parts.append(_shell(text))
    return "\n".join(parts) + "\n"


def test_the_postgresql_recipe_runs_as_written(tmp_path: Path) -> None:
    admin = os.environ.get("BULKOPS_TEST_POSTGRES_URL")
    if not admin:
        pytest.skip("BULKOPS_TEST_POSTGRES_URL is not set")
    name = f"bulkops_recipe_{uuid.uuid4().hex[:10]}"
    port = _free_port()
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BULKOPS_")}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        BULKOPS_PORT=str(port),
        BULKOPS_HOST="127.0.0.1",
        BULKOPS_URL=f"http://127.0.0.1:{port}",
    )
    (tmp_path / "recipe.sh").write_text(script(admin, name, port))
    try:
        with subprocess.Popen(
            ["bash", str(tmp_path / "recipe.sh")],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        ) as process:
            try:
                stdout, stderr = process.communicate(timeout=240)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
    finally:
        _drop(admin, name)
    logs = "".join(f"\n--- {p.name}\n{p.read_text()[-2000:]}" for p in tmp_path.glob("*.log"))
    assert process.returncode == 0, f"{stdout[-3000:]}\n--- stderr\n{stderr[-3000:]}{logs}"
    # The expected output the recipe shows.
    assert "CREATE ROLE" in stdout and "CREATE DATABASE" in stdout
    assert f"Database is up to date: postgresql://{name}:change-me@" in stdout
    assert '"status":"Healthy"' in stdout.replace(" ", "")
    assert "CompletedWithErrors" in stdout + stderr
    assert stdout.rstrip().splitlines()[-1] == "8"  # every row recorded
    workers = [p.read_text() for p in tmp_path.glob("process-[12].log")]
    assert all("worker started" in text for text in workers), logs


def _drop(admin: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'DROP ROLE IF EXISTS "{name}"')
