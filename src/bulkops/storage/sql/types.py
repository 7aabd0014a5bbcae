"""Column types that make SQLite and PostgreSQL round-trip the same Python values."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum
from typing import Any, Generic, TypeVar
from uuid import UUID

from sqlalchemy import JSON, DateTime, String
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

E = TypeVar("E", bound=Enum)

# JSONB on PostgreSQL (smaller, indexable); JSON text elsewhere. SQL NULL stands for None.
JsonType = JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in and out.

    PostgreSQL stores ``timestamptz``. SQLite has no timezone support, so the value is stored
    as naive UTC text (fixed width, so text comparison orders it correctly) and UTC is
    re-attached on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Normalise to UTC; naive input is refused because its zone is unknowable."""
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()}: bulkops stores aware UTC")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any | None, dialect: Dialect) -> datetime | None:
        """Attach or convert to UTC."""
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise ValueError(f"expected a datetime column value, got {type(value).__name__}")
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class UuidType(TypeDecorator[UUID]):
    """``uuid.UUID``: native ``uuid`` on PostgreSQL, 36-character text elsewhere."""

    impl = String(36)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """Pick the native type where the database has one."""
        if dialect.name == "postgresql":
            return dialect.type_descriptor(postgresql.UUID(as_uuid=True))
        return dialect.type_descriptor(String(36))

    def process_bind_param(self, value: UUID | None, dialect: Dialect) -> Any:
        """Pass UUIDs natively to PostgreSQL, as canonical text elsewhere."""
        if value is None:
            return None
        if dialect.name == "postgresql":
            return value
        return str(value)

    def process_result_value(self, value: Any | None, dialect: Dialect) -> UUID | None:
        """Always hand back ``uuid.UUID``."""
        if value is None or isinstance(value, UUID):
            return value
        return UUID(str(value))


class EnumText(TypeDecorator[E], Generic[E]):
    """A str-valued Enum stored as its value (plain text, no database enum type).

    Plain text keeps migrations simple when a member is added later.
    """

    impl = String(32)
    cache_ok = True

    def __init__(self, enum_type: type[E]) -> None:
        super().__init__()
        self.enum_type = enum_type

    def process_bind_param(self, value: E | None, dialect: Dialect) -> Any:
        """Store the member's value (a plain str is accepted when it names a member)."""
        if value is None:
            return None
        return self.enum_type(value).value

    def process_result_value(self, value: Any | None, dialect: Dialect) -> E | None:
        """Map the stored value back to its member."""
        if value is None:
            return None
        return self.enum_type(value)
