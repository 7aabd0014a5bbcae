"""What a worker process of ``serve`` carries: its entry module imports none of the heavy
libraries only other processes (or rare paths) need, and the schema check of a process
that does not migrate reads the migrations' revisions without Alembic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from alembic.script import ScriptDirectory

from bulkops.storage.sql.migrate import alembic_config
from bulkops.storage.sql.revisions import head_revision, known_revisions

# Imported where they are needed: the HTTP edge, migrating, reading an XLSX file, sending
# a webhook or fetching a source URL, the CLI, PostgreSQL (by its engine).
HEAVY = (
    "alembic",
    "openpyxl",
    "httpx",
    "psycopg",
    "fastapi",
    "starlette",
    "uvicorn",
    "click",
    "rich",
    "bulkops.api",
    "bulkops.cli",
    "bulkops.gateway",
    "bulkops.client",
)


def test_a_worker_process_entry_imports_no_heavy_module() -> None:
    # The SQL adapter a worker on SQLite opens is imported too, as Runtime.open does.
    code = (
        "import sys\n"
        "import bulkops.supervisor.child\n"
        "import bulkops.storage.sql\n"
        "import bulkops.storage.sql.liveness\n"
        f"heavy = {HEAVY!r}\n"
        "print(' '.join(sorted(name for name in sys.modules"
        " if any(name == h or name.startswith(h + '.') for h in heavy))))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert found.stdout.split() == []


def test_the_revisions_read_from_the_files_are_alembics() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert head_revision() == script.get_current_head()
    assert known_revisions() == {revision.revision for revision in script.walk_revisions()}


def test_migrating_a_database_already_at_the_head_imports_no_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bulkops.db'}"
    code = (
        "import sys\n"
        "from bulkops.storage.sql.migrate import migrate, schema_revision\n"
        f"migrate({url!r})\n"
        "print('alembic' in sys.modules, schema_revision(" + repr(url) + "))\n"
    )

    def run() -> list[str]:
        found = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
        )
        return found.stdout.split()

    assert run() == ["True", head_revision()]  # migrated: Alembic ran
    assert run() == ["False", head_revision()]  # at the head already: nothing to run


def test_migrating_a_new_database_apart_leaves_alembic_out_of_the_caller(tmp_path: Path) -> None:
    # serve's HTTP process on a new database: the revisions run in a child process.
    url = f"sqlite:///{tmp_path / 'bulkops.db'}"
    code = (
        "import sys\n"
        "from bulkops.storage.sql.migrate import migrate, migrate_apart, schema_revision\n"
        f"migrate_apart({url!r}, schema_revision({url!r}))\n"
        f"migrate({url!r})\n"
        f"print('alembic' in sys.modules, schema_revision({url!r}))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert found.stdout.split() == ["False", head_revision()]
