"""``--operations a.b`` imports from the current directory, as uvicorn's ``--app-dir .``."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from bulkops.definition.registry import load_registry

MODULE = textwrap.dedent(
    """
    import bulkops as bo

    @bo.operation("from-the-project")
    class FromTheProject(bo.RowOperation[bo.Metadata, bo.Row]):
        async def process_row(self, row: bo.Row, metadata: bo.Metadata) -> None:
            pass
    """
)


def project(root: Path, package: str) -> None:
    (root / package).mkdir()
    (root / package / "__init__.py").write_text("")
    (root / package / "ops.py").write_text(MODULE)


def test_a_dotted_module_of_the_current_directory_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project(tmp_path, "myproject_ops_cwd")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    registry = load_registry(["myproject_ops_cwd.ops"])
    assert [d.name for d in registry] == ["from-the-project"]
    assert sys.path[0] == str(tmp_path)
