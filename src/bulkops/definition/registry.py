"""The registry of operations and the loader that fills it from modules or files."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType

from bulkops.definition.operation import OperationDefinition, definition_of
from bulkops.errors import DefinitionError


class Registry:
    """Operations by name; names are unique case-insensitively."""

    def __init__(self, definitions: Iterable[OperationDefinition | type] = ()) -> None:
        self._by_key: dict[str, OperationDefinition] = {}
        # The modules or files it was loaded from, when it was: another process can load
        # the same operations from them (a row helper).
        self.sources: tuple[str, ...] | None = None
        for item in definitions:
            self.add(item)

    def add(self, item: OperationDefinition | type) -> OperationDefinition:
        """Register a definition or a class decorated with ``@operation``."""
        definition = item if isinstance(item, OperationDefinition) else definition_of(item)
        if definition is None:
            raise DefinitionError(f"{item!r} is not decorated with @bulkops.operation")
        key = definition.name.casefold()
        existing = self._by_key.get(key)
        if existing is not None and existing.operation_class is not definition.operation_class:
            raise DefinitionError(
                f"Duplicate operation name {definition.name!r}: defined by "
                f"{_qualname(existing.operation_class)} and "
                f"{_qualname(definition.operation_class)}"
            )
        self._by_key[key] = definition
        return definition

    def get(self, name: str) -> OperationDefinition | None:
        """The definition registered under ``name`` (case-insensitive), or None."""
        return self._by_key.get(name.casefold())

    def __iter__(self) -> Iterator[OperationDefinition]:
        return iter(sorted(self._by_key.values(), key=lambda d: d.name.casefold()))

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.casefold() in self._by_key


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def import_source(spec: str) -> ModuleType:
    """Import a dotted module name or a ``.py`` file path."""
    spec = spec.strip()
    if spec.endswith(".py") or "/" in spec or "\\" in spec:
        path = Path(spec).expanduser().resolve()
        if not path.is_file():
            raise DefinitionError(f"Operations file not found: {spec}")
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
        module_name = f"bulkops_user_{path.stem}_{digest}"
        if module_name in sys.modules:
            return sys.modules[module_name]
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        if module_spec is None or module_spec.loader is None:
            raise DefinitionError(f"Cannot import operations file {spec}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        try:
            module_spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
        return module
    with_working_directory()
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        raise DefinitionError(f"Cannot import operations module {spec!r}: {exc}") from exc


def with_working_directory() -> None:
    """Put the current directory first on ``sys.path`` when it is not first, so a dotted
    name (``myapp.ops``) imports from the project a command runs in, as uvicorn's
    ``--app-dir`` (default ``.``) does: an installed ``bulkops`` script starts with its own
    directory on the path, not the current one."""
    here = os.getcwd()
    if not sys.path or not _same_directory(sys.path[0], here):
        sys.path.insert(0, here)


def _same_directory(entry: str, here: str) -> bool:
    return entry in ("", ".") or os.path.abspath(entry) == here


def discover(module: ModuleType) -> list[OperationDefinition]:
    """Every ``@operation`` class reachable from a module's namespace."""
    found: dict[int, OperationDefinition] = {}
    for value in vars(module).values():
        definition = definition_of(value)
        if definition is not None:
            found[id(definition.operation_class)] = definition
    return list(found.values())


def load_registry(specs: Sequence[str]) -> Registry:
    """Import each module or file and register the operations it defines.

    Raises:
        DefinitionError: a module cannot be imported, defines no operation, or two classes
            claim the same name.
    """
    registry = Registry()
    for spec in specs:
        module = import_source(spec)
        definitions = discover(module)
        if not definitions:
            raise DefinitionError(f"{spec!r} defines no @bulkops.operation class")
        for definition in definitions:
            registry.add(definition)
    registry.sources = tuple(specs)
    return registry
