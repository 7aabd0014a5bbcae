"""The job queue of a row helper process: which jobs a Stop ends, and which it answers at
once (those that never started)."""

from __future__ import annotations

import asyncio
from typing import Any, cast
from uuid import UUID, uuid4

from bulkops.engine.helper.messages import Job
from bulkops.engine.helper_child import _Jobs
from bulkops.storage.records import ChunkRecord


def job(job_id: int, operation: UUID) -> Job:
    return Job(
        operation_id=operation,
        operation="op",
        metadata={},
        path="rows.csv",
        file_format="csv",
        column_map=None,
        chunk=ChunkRecord(operation, job_id, 1, 10, -1),
        report_interval=1.0,
        id=job_id,
    )


async def test_a_stop_answers_at_once_the_queued_jobs_it_ends() -> None:
    jobs = _Jobs(cast(Any, None))  # stop() writes nothing itself
    a, b = uuid4(), uuid4()
    for each in (job(1, a), job(2, b), job(3, a)):
        jobs.add(each)
    running = await jobs.next()
    assert running is not None and running.id == 1
    task = asyncio.get_running_loop().create_future()
    jobs.started(running, cast(Any, task))

    assert sorted(jobs.stop(2)) == [2]  # queued, another operation's: only itself
    assert sorted(jobs.stop(1)) == [3]  # running (cancelled) and its operation's queued one
    assert task.cancelled()


async def test_a_stop_for_a_job_that_ended_is_forgotten() -> None:
    jobs = _Jobs(cast(Any, None))
    jobs.add(job(1, uuid4()))
    ended = await jobs.next()
    assert ended is not None
    jobs.ended(ended, clean=True)

    assert jobs.stop(1) == [] and jobs.stop(99) == []
    assert not jobs._stopped  # nothing left behind for jobs that will never come


async def test_a_withdrawal_ends_only_a_job_that_has_not_started() -> None:
    jobs = _Jobs(cast(Any, None))
    a = uuid4()
    for each in (job(1, a), job(2, uuid4()), job(3, a)):
        jobs.add(each)
    running = await jobs.next()
    assert running is not None
    task = asyncio.get_running_loop().create_future()
    jobs.started(running, cast(Any, task))

    assert jobs.stop(1, withdraw=True) == []  # running: it goes on
    assert not task.cancelled()
    assert jobs.stop(2, withdraw=True) == [2]  # queued: withdrawn, answered at once
    assert (await jobs.next(), await jobs.next()) == (None, job(3, a))  # 2 never starts
