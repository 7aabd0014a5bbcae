"""The schema revisions this code's migrations name, read from the migration files' text.

A process that only checks the schema (a worker, ``serve`` with migration at start off)
needs the revisions but not Alembic, which costs every such process memory for its whole
life; so the ``revision`` and ``down_revision`` assignments are parsed, not imported.
Alembic itself is imported only to migrate (``migrate.migrate``).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from bulkops.errors import StorageError

VERSIONS_DIR = Path(__file__).with_name("migrations") / "versions"


@cache
def revision_graph() -> dict[str, frozenset[str]]:
    """Every revision of the packaged migrations, with the revisions it follows."""
    graph: dict[str, frozenset[str]] = {}
    for path in sorted(VERSIONS_DIR.glob("*.py")):
        if path.name.startswith(("__", ".#")):
            continue
        names = _assignments(path)
        revision = names.get("revision")
        if not isinstance(revision, str):
            raise StorageError(f"the migration {path.name} names no revision")
        down = names.get("down_revision")
        if down is None:
            graph[revision] = frozenset()
        elif isinstance(down, str):
            graph[revision] = frozenset({down})
        elif isinstance(down, (tuple, list)):
            graph[revision] = frozenset(str(item) for item in down)
        else:
            raise StorageError(f"the migration {path.name} has an unreadable down_revision")
    return graph


def known_revisions() -> frozenset[str]:
    """Every schema revision this code's migrations name."""
    return frozenset(revision_graph())


def head_revision() -> str:
    """The newest schema revision this code knows: the one no other revision follows.

    Raises:
        StorageError: the migrations have no head, or more than one.
    """
    graph = revision_graph()
    followed = frozenset().union(*graph.values())
    heads = sorted(set(graph) - followed)
    if len(heads) != 1:
        raise StorageError(f"the packaged migrations have {len(heads)} heads: {heads}")
    return heads[0]


def _assignments(path: Path) -> dict[str, object]:
    """The module-level ``revision`` and ``down_revision`` literals of a migration file."""
    found: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets: list[ast.expr] = [node.target]
            value = node.value
        elif isinstance(node, ast.Assign):
            targets, value = list(node.targets), node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in ("revision", "down_revision"):
                found[target.id] = ast.literal_eval(value)
    return found
