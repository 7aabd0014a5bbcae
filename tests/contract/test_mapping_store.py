"""MappingStore and the fileSha256 list filter, on memory, SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

from bulkops.storage.memory import MemoryMappingStore
from bulkops.storage.ports import MappingStore
from bulkops.storage.records import OperationQuery, SavedMapping
from tests.contract.conftest import MakeOperation, Stores

NOW = datetime(2024, 5, 17, 9, 30, 15, 123456, tzinfo=UTC)


def mappings_of(stores: Stores) -> MappingStore:
    if stores.kind == "memory":
        return MemoryMappingStore()
    store: MappingStore = stores.operations  # type: ignore[assignment]
    return store


def saved(name: str, tenant: str | None = None, **column_map: str) -> SavedMapping:
    return SavedMapping(tenant, "import-users", name, column_map or {"E-Mail": "email"}, NOW)


async def test_mappings_are_kept_per_tenant_and_operation(stores: Stores) -> None:
    store = mappings_of(stores)
    await store.save_mapping(saved("supplier b"))
    await store.save_mapping(saved("supplier a"))
    await store.save_mapping(saved("supplier a", tenant="acme", Mail="email"))
    assert [m.name for m in await store.list_mappings(None, "import-users")] == [
        "supplier a",
        "supplier b",
    ]
    assert await store.list_mappings(None, "other") == []
    mine = await store.get_mapping("acme", "import-users", "supplier a")
    assert mine == saved("supplier a", tenant="acme", Mail="email")
    assert await store.get_mapping("acme", "import-users", "supplier b") is None
    assert await store.get_mapping(None, "import-users", "supplier a") == saved("supplier a")


async def test_a_save_replaces_and_a_delete_removes(stores: Stores) -> None:
    store = mappings_of(stores)
    await store.save_mapping(saved("monthly"))
    await store.save_mapping(saved("monthly", Name="name"))
    found = await store.get_mapping(None, "import-users", "monthly")
    assert found is not None and found.column_map == {"Name": "name"}
    assert await store.delete_mapping(None, "import-users", "monthly") is True
    assert await store.delete_mapping(None, "import-users", "monthly") is False
    assert await store.list_mappings(None, "import-users") == []


async def test_the_list_filters_by_file_hash(stores: Stores, make_operation: MakeOperation) -> None:
    hashed = make_operation(file_sha256="a" * 64)
    await stores.operations.add(hashed, [])
    await stores.operations.add(make_operation(file_sha256="b" * 64), [])
    await stores.operations.add(make_operation(), [])
    page = await stores.operations.list(OperationQuery(file_sha256="a" * 64))
    assert [r.id for r in page.items] == [hashed.id]
    stored = await stores.operations.get(hashed.id)
    assert stored is not None and stored.file_sha256 == "a" * 64
