"""The architecture the folders show, enforced: every module of every package imports only
the layers below its own (and the libraries its layer may use).

From the bottom: the foundation (errors, clock, the wire vocabulary, settings); definition;
formats; storage (ports and records; adapters beside them); observability and channels;
the engine; the use-cases (service); the composition root (runtime, worker, testing);
then the edges: api (which mounts the dashboard), gateway, client, cli. An import found
anywhere in a module counts, in a function or under TYPE_CHECKING too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "src" / "bulkops"

HTTP = ("fastapi", "starlette", "uvicorn", "httpx", "multipart")
SQL = ("sqlalchemy", "alembic", "psycopg", "aiosqlite", "sqlite3")

FOUNDATION = ("bulkops.errors", "bulkops.clock", "bulkops.wire")
STORAGE_ADAPTERS = ("bulkops.storage.sql", "bulkops.storage.memory", "bulkops.storage.files")
# The engine's scheduling machinery: the use-cases reach the engine through ports instead.
SCHEDULING = (
    "bulkops.engine.scheduler",
    "bulkops.engine.processor",
    "bulkops.engine.run",
    "bulkops.engine.chunks",
    "bulkops.engine.dispatcher",
    "bulkops.engine.chunk_runs",
    "bulkops.engine.feed",
    "bulkops.engine.runners",
    "bulkops.engine.heartbeat",
    "bulkops.engine.splits",
    "bulkops.engine.polling",
    "bulkops.engine.recorder",
    "bulkops.engine.writer",
    "bulkops.engine.helper",
)
BELOW_SERVICE = (
    *FOUNDATION,
    "bulkops.settings",
    "bulkops.definition",
    "bulkops.formats",
    "bulkops.storage",
    "bulkops.observability",
    "bulkops.channels",
    "bulkops.engine",
    "bulkops.sources.base",
)
COMPOSITION = (*BELOW_SERVICE, "bulkops.service", "bulkops.runtime")


@dataclass(frozen=True)
class Layer:
    """What the modules of a layer may import: ``may`` (prefixes of ours, beside the
    layer's own), except ``never`` (narrower prefixes), and no library of ``libraries``."""

    may: tuple[str, ...]
    never: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()


# Module prefix -> its layer; a module belongs to the longest prefix that names it.
LAYERS: dict[str, Layer] = {
    "bulkops.errors": Layer((), libraries=HTTP + SQL),
    "bulkops.clock": Layer((), libraries=HTTP + SQL),
    "bulkops.wire": Layer((), libraries=HTTP + SQL),
    "bulkops.settings": Layer(FOUNDATION, libraries=HTTP + SQL),
    "bulkops.definition": Layer(FOUNDATION, libraries=HTTP + SQL),
    "bulkops.formats": Layer((*FOUNDATION, "bulkops.definition"), libraries=HTTP + SQL),
    "bulkops.storage": Layer(FOUNDATION, libraries=HTTP),
    # Metrics are a leaf every layer records into: they know the domain's states only.
    "bulkops.observability": Layer(
        (*FOUNDATION, "bulkops.storage.states", "bulkops.storage.records"),
        libraries=HTTP + SQL,
    ),
    # Channels are adapters of the notification outbox: HTTP out, storage through its ports.
    "bulkops.channels": Layer(
        (*FOUNDATION, "bulkops.storage", "bulkops.observability"),
        never=STORAGE_ADAPTERS,
        libraries=SQL,
    ),
    # Sources read a create's file from S3 or an allow-listed URL (HTTP out).
    "bulkops.sources": Layer(FOUNDATION, libraries=SQL),
    "bulkops.engine": Layer(
        (
            *FOUNDATION,
            "bulkops.definition",
            "bulkops.formats",
            "bulkops.storage",
            "bulkops.observability",
        ),
        never=STORAGE_ADAPTERS,
        libraries=HTTP + SQL,
    ),
    "bulkops.service": Layer(
        BELOW_SERVICE,
        never=(*STORAGE_ADAPTERS, *SCHEDULING, "bulkops.settings"),
        libraries=HTTP + SQL,
    ),
    # The composition root builds everything from settings: adapters and engine included.
    "bulkops.runtime": Layer((*BELOW_SERVICE, "bulkops.service", "bulkops.sources")),
    "bulkops.worker": Layer(COMPOSITION),
    "bulkops.testing": Layer(COMPOSITION),
    # serve's worker processes: the HTTP process's supervisor and what each of them runs.
    "bulkops.supervisor": Layer(COMPOSITION),
    # A static page that calls the HTTP API: it needs nothing of ours.
    "bulkops.dashboard": Layer((), libraries=SQL),
    # Routes go through the use-cases: no engine, no storage ports or adapters (records
    # and states are the domain's vocabulary and may be named).
    "bulkops.api": Layer(
        (*COMPOSITION, "bulkops.supervisor", "bulkops.dashboard"),
        never=(
            "bulkops.engine",
            "bulkops.storage.ports",
            "bulkops.storage.lifecycle",
            *STORAGE_ADAPTERS,
        ),
        libraries=SQL,
    ),
    # The gateway talks to backends over HTTP; it shares the API's auth, errors and
    # description, never the engine or storage.
    "bulkops.gateway": Layer(
        (*FOUNDATION, "bulkops.settings", "bulkops.api", "bulkops.dashboard", "bulkops.service"),
        libraries=SQL,
    ),
    # The client speaks HTTP only: it shares the wire vocabulary with the server, no more.
    "bulkops.client": Layer(("bulkops.wire",), libraries=SQL),
    "bulkops.cli.client": Layer(("bulkops.client", "bulkops.wire"), libraries=SQL),
    # The command line is the outermost edge (the database-side commands live beside the
    # client ones, in their own modules).
    "bulkops.cli": Layer(("bulkops",)),
    "bulkops.__main__": Layer(("bulkops",)),
    # Examples use the public surface only: ``import bulkops``.
    "bulkops.examples": Layer(()),
}
ROOT = "bulkops"  # the package itself: the public surface, re-exporting every layer
MAY_IMPORT_ROOT = ("bulkops.examples", "bulkops.cli", "bulkops.__main__")


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


def _layer_of(module: str) -> str | None:
    names = [prefix for prefix in LAYERS if _matches(module, prefix)]
    return max(names, key=len) if names else None


def _refused(module: str, imported: str) -> bool:
    """Whether ``module`` may not import ``imported`` (a module of ours or a library)."""
    prefix = _layer_of(module)
    assert prefix is not None, f"{module} belongs to no layer"
    layer = LAYERS[prefix]
    if not _matches(imported, ROOT):
        return any(_matches(imported, library) for library in layer.libraries)
    if imported == ROOT:
        return prefix not in MAY_IMPORT_ROOT
    if _matches(imported, prefix) or (_layer_of(imported) == prefix):
        return False  # within its own layer
    if any(_matches(imported, banned) for banned in layer.never):
        return True
    return not any(_matches(imported, allowed) for allowed in layer.may)


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module_name(p))
def test_each_module_imports_only_what_its_layer_may(path: Path) -> None:
    module = _module_name(path)
    if module == ROOT:
        return  # the public surface re-exports the user API of every layer
    broken = sorted(name for name in _imports(path) if _refused(module, name))
    assert not broken, f"{module} imports {broken}"


def test_every_module_belongs_to_a_layer() -> None:
    orphans = [
        name for name in map(_module_name, MODULES) if name != ROOT and _layer_of(name) is None
    ]
    assert not orphans, f"modules of no layer: {orphans}"


@pytest.mark.parametrize(
    ("module", "imported"),
    [
        ("bulkops.client.models", "bulkops.storage.states"),
        ("bulkops.client.models", "bulkops.engine.signals"),
        ("bulkops.cli.client", "bulkops.settings"),
        ("bulkops.cli.client", "bulkops.storage.sql"),
        ("bulkops.service.submission", "bulkops.engine.scheduler"),
        ("bulkops.dashboard.routes", "bulkops.api.errors"),
        ("bulkops.storage.sql.rows", "bulkops.engine.rows"),
        ("bulkops.engine.rows", "bulkops.service.queries"),
        ("bulkops.engine.rows", "bulkops.storage.sql"),
        ("bulkops.definition.operation", "bulkops.formats"),
        ("bulkops.gateway.app", "bulkops.runtime"),
        ("bulkops.wire", "bulkops.storage.states"),
        ("bulkops.engine.rows", "fastapi"),
        ("bulkops.api.app", "sqlalchemy"),
        ("bulkops.storage.sql.rows", "bulkops"),
    ],
)
def test_imports_against_the_direction_are_refused(module: str, imported: str) -> None:
    assert _refused(module, imported)


@pytest.mark.parametrize(
    ("module", "imported"),
    [
        ("bulkops.client.models", "bulkops.wire"),
        ("bulkops.cli.main", "bulkops.storage.sql"),
        ("bulkops.api.app", "bulkops.dashboard"),
        ("bulkops.engine.rows", "bulkops.storage.records"),
        ("bulkops.service.signals", "bulkops.engine.signals"),
        ("bulkops.runtime", "bulkops.storage.sql"),
        ("bulkops.examples.operations", "bulkops"),
    ],
)
def test_imports_along_the_direction_pass(module: str, imported: str) -> None:
    assert not _refused(module, imported)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (type-checking imports included).
    A package's ``__init__`` only hands names on, so packages are left out."""
    modules = [path for path in MODULES if path.name != "__init__.py"]
    names = {_module_name(path) for path in modules}
    graph: dict[str, set[str]] = {}
    for path in modules:
        found = {name for name in _imports(path) if name in names}
        graph[_module_name(path)] = found - {_module_name(path)}
    return graph


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (a list of modules that import each other in turn)."""
    done: set[str] = set()

    def visit(module: str, trail: list[str]) -> list[str] | None:
        if module in trail:
            return [*trail[trail.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph.get(module, ())):
            found = visit(imported, [*trail, module])
            if found:
                return found
        done.add(module)
        return None

    for module in sorted(graph):
        if module.startswith(f"{ROOT}.") and (found := visit(module, [])):
            return found
    return None


def test_no_module_imports_its_caller() -> None:
    graph = _import_graph()
    assert _circle(graph) is None, f"an import circle: {' -> '.join(_circle(graph) or [])}"


def test_a_circle_is_found() -> None:
    graph = {"bulkops.a": {"bulkops.b"}, "bulkops.b": {"bulkops.c"}, "bulkops.c": {"bulkops.a"}}
    assert _circle(graph) == ["bulkops.a", "bulkops.b", "bulkops.c", "bulkops.a"]
    assert _circle({"bulkops.a": {"bulkops.b"}, "bulkops.b": set()}) is None
