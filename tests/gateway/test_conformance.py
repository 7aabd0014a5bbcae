"""Conformance: the instance's HTTP integration tests, unchanged, against a gateway in front of
two real ``bulkops serve`` backends (tests/integration/conftest.py, BULKOPS_TEST_GATEWAY=1).

The tests marked ``in_process`` there (they reach into the in-process runtime or the
operations' in-process state) are left out of that run; the rest must pass.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 3000  # seconds for the whole nested run on a busy 2-core machine
MINIMUM_PASSED = 50  # the HTTP suite and the HTTP-only tests of the other modules


@pytest.mark.e2e
@pytest.mark.timeout(RUN_TIMEOUT + 60)
def test_the_instance_http_suite_passes_through_the_gateway(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["BULKOPS_TEST_GATEWAY"] = "1"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/integration",
            "-p",
            "no:cacheprovider",
            "--timeout=900",  # a backend pair's first start counts against the first test
            "--basetemp",
            str(tmp_path / "run"),
            "-q",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= MINIMUM_PASSED, summary
    assert not re.search(r"\d+ (failed|error|skipped)", summary), summary
