"""Operations the dashboard tests drive: gated rows (live progress, cancel), rows that fail
until they are taken off a fail list (retry), a signal step (signal buttons), and metadata of
every field type (the generated form)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path

import bulkops as bo


class GateMeta(bo.Metadata):
    requested_by: str
    gate: str | None = None  # rows wait until this file (or one of their own) exists
    fail_list: str | None = None  # rows whose name is a line of this file fail


class Person(bo.Row):
    name: str
    email: str
    age: int | None = None

    def row_id(self) -> str | None:
        return self.email


@bo.operation(
    "gated-import",
    description="Imports people; rows wait for a gate file and fail while on a fail list",
    retryable=True,
    track_row_data=True,
)
class GatedImport(bo.RowOperation[GateMeta, Person]):
    async def validate_row(self, row: Person, metadata: GateMeta) -> None:
        if "@" not in row.email:
            raise bo.ValidationError(f"Invalid email address {row.email!r}")

    async def process_row(self, row: Person, metadata: GateMeta) -> None:
        if metadata.gate:  # the file `gate` opens every row; `gate.NAME` opens row NAME
            gate = Path(metadata.gate)
            own = gate.with_name(f"{gate.name}.{row.name}")
            while not (gate.exists() or own.exists()):
                await asyncio.sleep(0.02)
        if metadata.fail_list:
            listed = Path(metadata.fail_list)
            if listed.exists() and row.name in listed.read_text().split():
                raise RuntimeError(f"{row.name} is on the fail list")


class TypedMeta(bo.Metadata):
    requested_by: str
    batch: int
    ratio: float | None = None
    urgent: bool = False
    department: str | None  # required, but may be null
    start_at: datetime | None = None


class Contact(bo.Row):
    name: str
    email: str


@bo.operation("typed-import", description="Takes metadata of every field type")
class TypedImport(bo.RowOperation[TypedMeta, Contact]):
    async def validate_row(self, row: Contact, metadata: TypedMeta) -> None:
        if "@" not in row.email:
            raise bo.ValidationError(f"Invalid email address {row.email!r}")

    async def process_row(self, row: Contact, metadata: TypedMeta) -> None:
        return None


class ApprovalMeta(bo.Metadata):
    requested_by: str


class Request(bo.Row):
    name: str


@bo.operation(
    "approval", description="Each row waits for a signal keyed by its name", retryable=True
)
class Approval(bo.PipelineOperation[ApprovalMeta, Request]):
    @bo.signal_step(
        "Approve", order=1, key=lambda row, metadata: row.name, timeout=timedelta(minutes=5)
    )
    async def ask(self, row: Request, metadata: ApprovalMeta) -> None:
        return None

    @bo.step("Record", order=2)
    async def record(self, row: Request, metadata: ApprovalMeta) -> None:
        return None
