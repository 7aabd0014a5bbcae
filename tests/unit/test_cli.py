"""The command line: settings flags, clear errors, migrate."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from bulkops import Settings
from bulkops.cli.main import app

runner = CliRunner()


def test_every_setting_is_a_flag_of_serve() -> None:
    result = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for name in Settings.model_fields:
        assert "--" + name.replace("_", "-") in result.output, name


def test_invalid_settings_name_the_flag_and_variable() -> None:
    result = runner.invoke(app, ["worker", "--worker-count", "0"])
    assert result.exit_code == 2
    assert "--worker-count / BULKOPS_WORKER_COUNT: Input should be greater" in result.output


def test_wildcard_cors_origin_is_refused_at_start() -> None:
    result = runner.invoke(app, ["serve"], env={"BULKOPS_CORS_ORIGINS": "*"})
    assert result.exit_code == 2
    assert "'*' is not allowed" in result.output


def test_unknown_operations_file_is_an_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["migrate", "--operations", str(tmp_path / "none.py")])
    assert result.exit_code == 0  # migrate does not load operations
    served = runner.invoke(
        app,
        [
            "serve",
            "--operations",
            str(tmp_path / "none.py"),
            "--database-url",
            f"sqlite:///{tmp_path}/db.sqlite",
        ],
    )
    assert served.exit_code == 1
    assert "Operations file not found" in served.output


def test_migrate_creates_the_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/sub/bulkops.db"
    result = runner.invoke(app, ["migrate", "--database-url", url])
    assert result.exit_code == 0 and "up to date" in result.output
    with sqlite3.connect(tmp_path / "sub" / "bulkops.db") as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert {"operations", "row_records", "events", "retry_history"} <= tables
    memory = runner.invoke(app, ["migrate", "--database-url", "memory://"])
    assert memory.exit_code == 0 and "no migrations" in memory.output
