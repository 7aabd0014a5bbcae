"""Liveness against memory, SQLite and PostgreSQL: which holders are certainly dead or
certainly alive, and voiding the heartbeats of what they hold. Memory knows neither (one
process); SQLite knows a process of this host that no longer runs, or runs; PostgreSQL a
marked holder whose advisory lock no session holds, or a session holds."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from bulkops.storage.liveness import NoLiveness
from bulkops.storage.ports import Liveness
from bulkops.storage.sql.liveness import PostgresLiveness, SqliteLiveness
from bulkops.storage.states import OperationStatus
from tests.contract.conftest import BASE_TIME, MakeOperation, Stores


@pytest.fixture
async def liveness(stores: Stores, request: pytest.FixtureRequest) -> AsyncIterator[Liveness]:
    if stores.database is None:
        yield NoLiveness()
    elif stores.kind == "sqlite":
        yield SqliteLiveness(stores.database)
    else:
        yield PostgresLiveness(stores.database, request.getfixturevalue("migrated_postgres_url"))


def gone_process_id() -> int:
    """The id of a process of this host that has exited."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


async def test_a_holder_known_dead_is_found_and_its_work_abandoned_at_once(
    stores: Stores, liveness: Liveness, make_operation: MakeOperation
) -> None:
    dead = liveness.mark(f"{socket.gethostname()}:{gone_process_id()}:0badc0de")
    fresh = BASE_TIME + timedelta(days=1)  # a heartbeat nobody would count stale
    record = make_operation(status=OperationStatus.RUNNING, worker_id=dead, heartbeat_at=fresh)
    await stores.operations.add(record)

    found = await liveness.dead()

    assert await liveness.alive() == set()
    if stores.kind == "memory":
        assert found == set()  # one process: nothing to know beyond the heartbeat
        return
    assert found == {dead}
    await liveness.expire(found)
    abandoned = await stores.operations.abandoned(BASE_TIME, 10)
    assert [(r.id, r.heartbeat_at) for r in abandoned] == [(record.id, None)]


async def test_a_live_holder_is_not_dead(
    stores: Stores, liveness: Liveness, make_operation: MakeOperation
) -> None:
    # This process, or on PostgreSQL a marked id whose lock is held.
    alive = liveness.mark(f"{socket.gethostname()}:{os.getpid()}:600dc0de")
    record = make_operation(status=OperationStatus.RUNNING, worker_id=alive, heartbeat_at=BASE_TIME)
    await stores.operations.add(record)
    keeping = asyncio.create_task(liveness.keep(alive))
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while alive in await liveness.dead():
            assert asyncio.get_running_loop().time() < deadline, "the lock was never taken"
            await asyncio.sleep(0.05)
        known = await liveness.alive()
    finally:
        keeping.cancel()
        await asyncio.gather(keeping, return_exceptions=True)
    # Known alive where storage can know it: its work is not taken on its heartbeat alone.
    assert known == (set() if stores.kind == "memory" else {alive})
    if stores.kind == "postgres":  # its session ended with the task: known dead at once
        assert alive in await liveness.dead()
        assert await liveness.alive() == set()


async def test_unmarked_holders_on_other_hosts_are_left_to_their_heartbeat(
    stores: Stores, liveness: Liveness, make_operation: MakeOperation
) -> None:
    record = make_operation(
        status=OperationStatus.RUNNING, worker_id="elsewhere:1:abcdef01", heartbeat_at=BASE_TIME
    )
    await stores.operations.add(record)
    assert await liveness.dead() == set()
    assert await liveness.alive() == set()
