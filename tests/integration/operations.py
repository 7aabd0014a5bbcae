"""Operations used by the integration tests; they record what they did."""

from __future__ import annotations

import asyncio
import threading

import bulkops as bo

PROCESSED: list[str] = []
THREADS: list[str] = []


class Gate:
    """Holds rows of the ``gated`` operation until a test opens it."""

    def __init__(self) -> None:
        self.event: asyncio.Event | None = None
        self.entered = 0

    def reset(self) -> None:
        self.event = None
        self.entered = 0

    async def wait(self) -> None:
        if self.event is None:
            self.event = asyncio.Event()
        self.entered += 1
        await self.event.wait()

    def open(self) -> None:
        if self.event is None:
            self.event = asyncio.Event()
        self.event.set()


GATE = Gate()


class Meta(bo.Metadata):
    requested_by: str
    department: str | None = None


class Person(bo.Row):
    name: str
    email: str
    age: int | None = None

    def row_id(self) -> str | None:
        return self.email


@bo.operation("record", description="Records each processed row", track_row_data=True)
class Record(bo.RowOperation[Meta, Person]):
    async def validate_row(self, row: Person, metadata: Meta) -> None:
        if "@" not in row.email:
            raise bo.ValidationError(f"Invalid email {row.email!r}")

    async def process_row(self, row: Person, metadata: Meta) -> None:
        if row.name == "boom":
            raise RuntimeError("exploded on purpose")
        PROCESSED.append(row.name)


@bo.operation("gated", description="Rows whose name starts with 'wait' wait at the gate")
class Gated(bo.RowOperation[Meta, Person]):
    async def process_row(self, row: Person, metadata: Meta) -> None:
        if row.name.startswith("wait"):
            await GATE.wait()
        PROCESSED.append(row.name)


@bo.operation("strict-meta", description="Rejects metadata in code")
class StrictMeta(bo.RowOperation[Meta, Person]):
    def validate_metadata(self, metadata: Meta) -> None:
        if metadata.requested_by == "nobody":
            raise bo.ValidationError("nobody may not import")

    def process_row(self, row: Person, metadata: Meta) -> None:
        THREADS.append(threading.current_thread().name)
        PROCESSED.append(row.name)


ALL = [Record, Gated, StrictMeta]
