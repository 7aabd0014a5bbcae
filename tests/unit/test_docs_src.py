"""Every file under docs_src/ (the samples the documentation includes, FastAPI's convention)
runs as a script and checks itself; a new file is picked up without being listed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "docs_src").rglob("*.py"))


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_sample_runs(sample: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(sample)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"{sample.name}:\n{result.stdout}\n{result.stderr}"
