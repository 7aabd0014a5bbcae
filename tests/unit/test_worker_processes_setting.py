"""BULKOPS_WORKER_PROCESSES: how many worker processes serve starts."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from bulkops.cli.main import app
from bulkops.settings import Settings
from bulkops.supervisor.processes import _worker_settings


def test_default_is_one_per_core_this_process_may_use() -> None:
    assert Settings().effective_worker_processes == len(os.sched_getaffinity(0))
    assert Settings(worker_processes=3).effective_worker_processes == 3
    assert Settings(worker_processes=0).effective_worker_processes == 0


@pytest.mark.parametrize(
    "memory",
    [
        {"database_url": "memory://"},
        {"files_url": "memory://"},
        {"event_store": "memory"},
    ],
)
def test_storage_in_memory_keeps_processing_in_the_http_process(memory: dict[str, str]) -> None:
    assert Settings(worker_processes=2, **memory).effective_worker_processes == 0


def test_a_negative_count_is_refused() -> None:
    result = CliRunner().invoke(app, ["serve", "--worker-processes", "-1"])
    assert result.exit_code == 2
    assert "--worker-processes / BULKOPS_WORKER_PROCESSES" in result.output


def test_only_serve_has_the_flag() -> None:
    assert "--worker-processes" in CliRunner().invoke(app, ["serve", "--help"]).output
    assert "--worker-processes" not in CliRunner().invoke(app, ["worker", "--help"]).output


def test_worker_processes_migrate_nothing_and_start_row_helpers_only_when_asked() -> None:
    settings = _worker_settings(Settings())
    assert (settings.migrate_on_start, settings.row_helpers) == (False, 0)
    assert _worker_settings(Settings(row_helpers=2)).row_helpers == 2
