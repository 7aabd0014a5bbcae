"""/metrics of serve's HTTP process adds its worker processes' multiprocess files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bulkops.observability.metrics import Metrics

WORKER = """
from bulkops.observability.metrics import Metrics
metrics = Metrics(worker_process=True)
metrics.rows_done("imp", 3, 1)
observe = metrics.row_timer("imp")
for seconds in (0.0002, 0.002, 0.2):
    observe(seconds)
metrics.signal("success")
metrics.publish()
observe(0.0002)
metrics.publish()
"""


def _value(text: str, sample: str) -> float:
    lines = [line for line in text.splitlines() if line.startswith(sample + " ")]
    assert len(lines) == 1, (sample, lines)
    return float(lines[0].rsplit(" ", 1)[1])


def test_the_http_process_reports_the_worker_processes_counts(tmp_path: Path) -> None:
    environment = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    for _ in range(2):  # two worker processes, or one and its restart
        subprocess.run([sys.executable, "-c", WORKER], env=environment, check=True)
    http = Metrics()
    http.signal("success")
    http.include(tmp_path)
    text = http.render({}).decode()
    assert _value(text, 'bulkops_rows_processed_total{operation="imp",outcome="completed"}') == 6
    assert _value(text, 'bulkops_rows_processed_total{operation="imp",outcome="failed"}') == 2
    assert _value(text, 'bulkops_signals_total{outcome="success"}') == 3  # 1 here + 2 there
    count = 'bulkops_row_duration_seconds_count{operation="imp"}'
    assert _value(text, count) == 8
    assert _value(text, 'bulkops_row_duration_seconds_bucket{le="0.0005",operation="imp"}') == 4
    assert text.count("# TYPE bulkops_rows_processed_total counter") == 1
    assert "pid=" not in text
