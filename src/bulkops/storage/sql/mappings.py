"""Saved column mappings in SQL: the ``MappingStore`` part of ``SqlStore``."""

from __future__ import annotations

import builtins
from typing import Any

from sqlalchemy import and_, delete, select
from sqlalchemy.sql import ColumnElement

from bulkops.storage.records import SavedMapping
from bulkops.storage.sql.base import SqlBase
from bulkops.storage.sql.schema import saved_mappings

_m = saved_mappings.c
# Principals without a tenant keep their mappings under "" (a key column cannot be NULL).
_NO_TENANT = ""


def _key(tenant: str | None, operation_name: str, name: str) -> ColumnElement[bool]:
    return and_(
        _m.tenant == (tenant or _NO_TENANT),
        _m.operation_name == operation_name,
        _m.name == name,
    )


def _record(row: Any) -> SavedMapping:
    return SavedMapping(
        tenant=row.tenant or None,
        operation_name=row.operation_name,
        name=row.name,
        column_map=dict(row.column_map),
        updated_at=row.updated_at,
    )


class MappingMethods(SqlBase):
    """Saved column mappings, one row per tenant, operation and name."""

    async def save_mapping(self, mapping: SavedMapping) -> None:
        """Store ``mapping``, replacing the one of the same tenant, operation and name."""
        async with self._db.write() as conn:
            await conn.execute(
                delete(saved_mappings).where(
                    _key(mapping.tenant, mapping.operation_name, mapping.name)
                )
            )
            await conn.execute(
                saved_mappings.insert().values(
                    tenant=mapping.tenant or _NO_TENANT,
                    operation_name=mapping.operation_name,
                    name=mapping.name,
                    column_map=mapping.column_map,
                    updated_at=mapping.updated_at,
                )
            )

    async def get_mapping(
        self, tenant: str | None, operation_name: str, name: str
    ) -> SavedMapping | None:
        """The mapping of that tenant, operation and name, or None."""
        async with self._db.read() as conn:
            row = (
                await conn.execute(select(saved_mappings).where(_key(tenant, operation_name, name)))
            ).first()
        return None if row is None else _record(row)

    async def list_mappings(
        self, tenant: str | None, operation_name: str
    ) -> builtins.list[SavedMapping]:
        """The tenant's mappings of the operation, by name."""
        query = (
            select(saved_mappings)
            .where(_m.tenant == (tenant or _NO_TENANT), _m.operation_name == operation_name)
            .order_by(_m.name)
        )
        async with self._db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [_record(row) for row in rows]

    async def delete_mapping(self, tenant: str | None, operation_name: str, name: str) -> bool:
        """Remove the mapping; False when there was none."""
        async with self._db.write() as conn:
            result = await conn.execute(
                delete(saved_mappings).where(_key(tenant, operation_name, name))
            )
        return bool(result.rowcount)
