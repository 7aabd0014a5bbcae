"""The quick benchmark runs end to end and writes well-formed figures (no threshold checked)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[2]
CHECKED = {"PASS", "MISS"}
SCENARIOS = list(range(1, 24))
WITH_RATIOS = {
    1,
    3,
    6,
    8,
    10,
    11,
    12,
    13,
    15,
    16,
    17,
    19,
    20,
    21,
    22,
}  # every throughput figure comes with its ratio to the reference

pytestmark = pytest.mark.e2e


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_measured(scenario: dict[str, Any]) -> None:
    number = scenario["number"]
    assert scenario["verdict"] in CHECKED, scenario
    assert any(_is_number(v) for v in scenario["figures"].values()), scenario
    assert all(_is_number(v) or isinstance(v, str) for v in scenario["figures"].values())
    assert scenario["checks"], scenario
    for check in scenario["checks"]:
        assert check["verdict"] in CHECKED
        assert _is_number(check["value"]) and _is_number(check["limit"]), check
    if number in WITH_RATIOS:
        assert scenario["ratios"], scenario
    assert all(_is_number(v) for v in scenario["ratios"].values()), scenario


@pytest.mark.timeout(660)  # a loaded machine slows every scenario; no figure is checked
def test_quick_benchmark_reports_every_scenario(tmp_path: Path) -> None:
    out = tmp_path / "q.json"
    command = [sys.executable, "-m", "benchmarks.run", "--quick", "--out", str(out)]
    completed = subprocess.run(
        [*command, "--inputs", str(tmp_path / "inputs")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-4000:]
    assert "Verdict" in completed.stdout  # the table was printed

    body = json.loads(out.read_text())
    assert body["mode"] == "quick"
    assert body["reference"] and all(
        _is_number(ref["rowsPerSecond"]) and ref["rowsPerSecond"] > 0
        for ref in body["reference"].values()
    )
    scenarios = {scenario["number"]: scenario for scenario in body["scenarios"]}
    assert sorted(scenarios) == SCENARIOS
    for scenario in scenarios.values():
        assert scenario["title"] and scenario["target"]
        if scenario["verdict"] == "SKIP":
            assert scenario["skipped"].startswith("needs "), scenario
        else:
            _check_measured(scenario)
