"""The architecture the folders show, enforced: each layer imports only what it may."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "src" / "bulkops"

HTTP = ("fastapi", "starlette", "uvicorn", "httpx", "multipart")
SQL = ("sqlalchemy", "alembic", "psycopg", "aiosqlite", "sqlite3")
ABOVE_ENGINE = ("bulkops.service", "bulkops.api", "bulkops.cli", "bulkops.runtime")
STORAGE_ADAPTERS = (
    "bulkops.storage.sql",
    "bulkops.storage.memory",
    "bulkops.storage.files",
)

# layer (a module prefix) -> module prefixes it must never import
RULES: dict[str, tuple[str, ...]] = {
    "bulkops.definition": (
        *HTTP,
        *SQL,
        "bulkops.formats",
        "bulkops.engine",
        "bulkops.storage",
        *ABOVE_ENGINE,
    ),
    "bulkops.formats": (*HTTP, *SQL, "bulkops.engine", "bulkops.storage", *ABOVE_ENGINE),
    "bulkops.engine": (*HTTP, *SQL, *STORAGE_ADAPTERS, *ABOVE_ENGINE),
    "bulkops.storage": (*HTTP, "bulkops.engine", *ABOVE_ENGINE),
    "bulkops.service": (*HTTP, *SQL, *STORAGE_ADAPTERS, "bulkops.api", "bulkops.cli"),
    # Routes go through the use-cases: no engine, no storage ports or adapters (records and
    # states are the domain's vocabulary and may be named).
    "bulkops.api": (
        *SQL,
        "bulkops.engine",
        "bulkops.storage.ports",
        "bulkops.storage.lifecycle",
        *STORAGE_ADAPTERS,
    ),
    # Metrics are a leaf every layer may record into; they depend on nothing of ours but
    # the domain's vocabulary (states).
    "bulkops.observability": (
        *HTTP,
        *SQL,
        "bulkops.engine",
        "bulkops.storage.ports",
        *STORAGE_ADAPTERS,
        *ABOVE_ENGINE,
    ),
    # Channels are adapters of the outbox: HTTP out, storage through its ports only.
    "bulkops.channels": (
        *SQL,
        "bulkops.engine",
        *STORAGE_ADAPTERS,
        *ABOVE_ENGINE,
    ),
    # The client speaks HTTP only: nothing of the serving side.
    "bulkops.client": (
        *SQL,
        "bulkops.engine",
        "bulkops.storage.ports",
        *STORAGE_ADAPTERS,
        "bulkops.service",
        "bulkops.api",
        "bulkops.runtime",
    ),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module_name(p))
def test_each_module_imports_only_what_its_layer_may(path: Path) -> None:
    module = _module_name(path)
    forbidden = [banned for layer, banned in RULES.items() if _matches(module, layer)]
    broken = sorted(
        name
        for name in _imports(path)
        for banned in forbidden
        for prefix in banned
        if _matches(name, prefix)
    )
    assert not broken, f"{module} imports {broken}"


def test_the_rules_cover_every_layer_folder() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("_")}
    covered = {layer.split(".")[1] for layer in RULES}
    # The edges (cli, gateway, dashboard) and the examples may import any layer.
    assert folders - covered <= {"cli", "gateway", "dashboard", "examples"}
