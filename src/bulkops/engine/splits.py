"""A split operation's chunks begun and its end: a claimed chunk runs only while its
operation is Running and it was not resumed too often; the operation is finished (or
failed) from its stored rows, once, while it is still Running: by the worker that ended
its last chunk, or by the reaper when that worker stopped before it could."""

from __future__ import annotations

import contextlib
import logging
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.engine.context import EngineContext
from bulkops.engine.persistence import apply_change
from bulkops.errors import IllegalTransition, StorageError
from bulkops.storage import lifecycle
from bulkops.storage.lifecycle import OperationChange
from bulkops.storage.records import ChunkRecord, OperationRecord
from bulkops.storage.states import OperationStatus

log = logging.getLogger("bulkops.engine")


async def end_split(context: EngineContext, operation_id: UUID, failure: str | None) -> None:
    """Finish a split operation from its stored rows (or fail it with ``failure``)."""
    stores, retry = context.stores, context.retry
    counts = await retry.call(stores.operations.counts, operation_id)
    now = utcnow()

    def end(current: OperationRecord) -> OperationChange | None:
        if current.status is not OperationStatus.RUNNING:
            return None
        if failure is not None:
            return lifecycle.fail(current, failure, now, counts)
        return lifecycle.finish(current, counts, now)

    try:
        await apply_change(stores.operations, operation_id, end, retry=retry)
    except IllegalTransition:
        log.info("Operation %s moved on meanwhile; its stored status stands", operation_id)


async def admit_chunk(
    context: EngineContext, chunk: ChunkRecord, max_resumes: int
) -> OperationRecord | None:
    """The operation of a chunk this worker just claimed, when the chunk is to run: it is
    handed back when the operation is no longer Running, and the operation fails when the
    chunk was resumed more than ``max_resumes`` times (None in both cases).

    It rides an outage out (``StorageRetry``). When storage stays away, the chunk is handed
    back once it answers again, and the error raised: left held by this live process, it
    would wait ``ALIVE_PATIENCE`` times ``abandon_after`` before anyone took it."""
    retry = context.retry
    try:
        return await retry.call(_admit, context, chunk, max_resumes)
    except StorageError:
        with contextlib.suppress(StorageError):
            worker_id = context.config.worker_id
            await retry.call(
                context.stores.chunks.end_chunk,
                chunk.operation_id,
                chunk.index,
                worker_id,
                done=False,
            )
            await context.stores.wakeups.announce_work()
        raise


async def _admit(
    context: EngineContext, chunk: ChunkRecord, max_resumes: int
) -> OperationRecord | None:
    stores = context.stores
    record = await stores.operations.get(chunk.operation_id)
    if record is None or record.status is not OperationStatus.RUNNING:
        worker_id = context.config.worker_id
        await stores.chunks.end_chunk(chunk.operation_id, chunk.index, worker_id, done=False)
        return None
    if chunk.resume_count > max_resumes:
        await end_split(context, record.id, _gave_up_chunk(chunk.index, max_resumes))
        return None
    if chunk.resume_count:
        log.warning(
            "Resuming chunk %d of operation %s: its worker stopped responding",
            chunk.index,
            record.id,
        )
    return record


def _gave_up_chunk(index: int, limit: int) -> str:
    return (
        f"Processing of chunk {index} stopped more than {limit} times before it could finish "
        "(its worker crashed or lost storage each time); the operation is not resumed again"
    )
