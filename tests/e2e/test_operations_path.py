"""The installed ``bulkops`` script imports ``--operations a.b`` from where it runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.unit.test_operations_path import project


def test_the_installed_worker_imports_from_where_it_runs(tmp_path: Path) -> None:
    """The ``bulkops`` script starts with its own directory on the path, not the current
    one: the worker still finds the project's module and starts."""
    project(tmp_path, "myproject_ops_cli")
    script = Path(sys.executable).parent / "bulkops"
    database = f"sqlite:///{tmp_path}/worker.sqlite"
    subprocess.run(
        [str(script), "migrate", "--database-url", database], check=True, capture_output=True
    )
    command = [str(script), "worker", "--operations", "myproject_ops_cli.ops"]
    lines = []
    with subprocess.Popen(
        [*command, "--database-url", database, "--files-url", f"file://{tmp_path}/files"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    ) as worker:
        try:
            assert worker.stderr is not None
            for line in worker.stderr:  # ends when the process does
                lines.append(line)
                if "worker started" in line:
                    break
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    assert any("worker started" in line for line in lines), "".join(lines)
