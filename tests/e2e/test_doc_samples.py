"""Every page's samples run, in page order, as a reader would run them (see
``tests/doc_samples``): the page's shell and Python blocks become one bash script, run in a
fresh directory holding the repository's ``examples`` and ``docs_src``, with the checkout's
``bulkops`` on the PATH and a SQLite service of its own.

What the runner changes, and nothing more: port 8000 becomes a free port (``BULKOPS_PORT``
and ``BULKOPS_URL`` name it), a command whose comment says ``exit code N`` may end with N,
and the services run with a one-core machine's process counts (one worker process, no row
helpers: ``tests/e2e/test_worker_processes.py`` runs the defaults of more cores). A page is
picked up by the glob; a page with nothing to run is not a test case.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_samples import ROOT, SHELL, Block, blocks, pages, service
from tests.e2e.conftest import ONE_CORE

DEFAULT_SERVICE = "bulkops serve"
PAGE_TIMEOUT = 300  # seconds for one page's samples (a loaded machine runs CLI calls slowly)
RUNNABLE = [page for page in pages() if any(block.runs for block in blocks(page))]
_EXIT = re.compile(r"^(?P<command>[^#]*\S)\s+#.*\bexit code (?P<code>\d+)")
_EXIT_ALONE = re.compile(r"^\s*#.*\bexit code (?P<code>\d+)")
SERVICE_WAIT = """
bulkops_stop_tree() {  # a process and its descendants (make run -> bulkops serve)
  for child in $(pgrep -P "$1"); do bulkops_stop_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
bulkops_stop_services() {  # a new service replaces the last, as the reader's Ctrl+C
  for pid in $BULKOPS_SERVICES; do bulkops_stop_tree "$pid"; done
  for pid in $BULKOPS_SERVICES; do wait "$pid" 2>/dev/null || true; done
  BULKOPS_SERVICES=""
}
bulkops_wait_for_service() {
  for _ in $(seq 1 300); do
    curl -sf "$BULKOPS_URL/health/live" > /dev/null && return 0
    sleep 0.1
  done
  echo "no service answered at $BULKOPS_URL" >&2; return 1
}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _shell(text: str) -> str:
    """A shell block, a command allowed to end with N when its comment, or a comment line
    right after it (its output shown), says ``exit code N``."""
    lines: list[str] = []
    last_command = -1
    for line in text.splitlines():
        expected = _EXIT.match(line)
        alone = _EXIT_ALONE.match(line)
        if expected is not None:
            line = f"{expected['command']} || [ $? -eq {expected['code']} ]"
        elif alone is not None and last_command >= 0:
            lines[last_command] += f" || [ $? -eq {alone['code']} ]"
        if line.strip() and not line.lstrip().startswith("#"):
            last_command = len(lines)
        lines.append(line)
    return "\n".join(lines)


def _script(block: Block, index: int, python_so_far: list[str], port: int) -> str:
    text = block.text.replace(":8000", f":{port}")
    if block.kind == "file":
        target = block.arg
        return (
            f"mkdir -p \"$(dirname '{target}')\"\ncat > '{target}' <<'SAMPLE_EOF'\n{text}SAMPLE_EOF"
        )
    if block.kind == "background":
        started = [
            f"( {line} ) > background-{index}-{n}.log 2>&1 &\n"
            'BULKOPS_SERVICES="$BULKOPS_SERVICES $!"'
            for n, line in enumerate(text.splitlines())
            if line.strip() and not line.strip().startswith("#")
        ]
        return "\n".join(["bulkops_stop_services", *started, "bulkops_wait_for_service"])
    if block.lang == "python":
        source = text
        name = f"sample_{index}.py"
        if block.kind == "pytest":
            source = "\n".join([*python_so_far, source])
            return (
                f"cat > test_{name} <<'SAMPLE_EOF'\n{source}SAMPLE_EOF\n"
                f"python -m pytest -q -p no:cacheprovider -o asyncio_mode=auto test_{name}"
            )
        python_so_far.append(text)
        return f"cat > {name} <<'SAMPLE_EOF'\n{source}SAMPLE_EOF\npython {name}"
    return _shell(text)


def _talks_to_a_service(page: Path) -> bool:
    """A page that starts no service of its own but whose shell samples call one (a guide
    added without a ``samples need`` line): it gets ``bulkops serve``, the built-in
    examples."""
    found = blocks(page)
    if any(block.kind == "background" for block in found):
        return False
    return any(
        block.runs and block.lang in SHELL and re.search(r"\bbulkops [a-z]|\bcurl ", block.text)
        for block in found
    )


def page_script(page: Path, port: int) -> str:
    """The bash script that runs a page's samples."""
    parts = ["set -eo pipefail", SERVICE_WAIT, "trap bulkops_stop_services EXIT"]
    python_so_far: list[str] = []
    command = service(page) or (DEFAULT_SERVICE if _talks_to_a_service(page) else None)
    if command is not None:
        parts += [
            f"( {command} ) > background-service.log 2>&1 &",
            'BULKOPS_SERVICES="$!"',
            "bulkops_wait_for_service",
        ]
    for index, block in enumerate(blocks(page)):
        if block.runs:
            parts.append(f"# --- {block.where()}")
            parts.append(_script(block, index, python_so_far, port))
    return "\n".join(parts) + "\n"


@pytest.mark.timeout(PAGE_TIMEOUT + 60)
@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pages_samples_run(page: Path, tmp_path: Path) -> None:
    for shared in ("examples", "docs_src", "Makefile", "pyproject.toml", ".venv", "src"):
        if (ROOT / shared).exists():
            (tmp_path / shared).symlink_to(ROOT / shared)
    port = _free_port()
    bin_dir = str(Path(sys.executable).parent)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("BULKOPS_") or key == "BULKOPS_TEST_POSTGRES_URL"
    }
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(tmp_path),
        BULKOPS_PORT=str(port),
        BULKOPS_HOST="127.0.0.1",
        BULKOPS_URL=f"http://127.0.0.1:{port}",
        BULKOPS_DATABASE_URL=f"sqlite:///{tmp_path}/bulkops.sqlite",
        BULKOPS_FILES_URL=f"file://{tmp_path}/files",
        **ONE_CORE,
    )
    script = tmp_path / "page.sh"
    script.write_text(page_script(page, port))
    # A session of its own: whatever the page starts (make, a service) is stopped with it.
    with subprocess.Popen(
        ["bash", str(script)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=PAGE_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            stderr += f"\n(timed out after {PAGE_TIMEOUT} s)"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    logs = "".join(
        f"\n--- {log.name}\n{log.read_text()[-3000:]}" for log in tmp_path.glob("background-*.log")
    )
    assert process.returncode == 0, (
        f"{page.relative_to(ROOT)}: exit {process.returncode}\n--- stdout\n{stdout[-4000:]}"
        f"\n--- stderr\n{stderr[-4000:]}{logs}"
    )
