"""Which source a run measured: the commit, local changes, and edits made during the run."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "bulkops"


def _git(*args: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def newest_source_change() -> float:
    """The latest modification time of a file under src/bulkops (seconds since the epoch)."""
    return max((path.stat().st_mtime for path in SOURCE.rglob("*.py")), default=0.0)


def describe(newest_at_start: float) -> dict[str, Any]:
    """The commit, whether src/ differs from it, and whether src/ changed during the run."""
    newest = newest_source_change()
    return {
        "commit": _git("rev-parse", "HEAD") or None,
        "srcHasLocalChanges": bool(_git("status", "--porcelain", "--", "src")),
        "srcNewestChange": datetime.fromtimestamp(newest, UTC).isoformat(timespec="seconds"),
        "srcChangedDuringRun": newest > newest_at_start,
    }
