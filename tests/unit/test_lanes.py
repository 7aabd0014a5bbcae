"""The processing lane: a mark on the engine's tasks (and theirs), never on the API's."""

from __future__ import annotations

import asyncio

from bulkops.storage.lanes import enter_processing_lane, in_processing_lane


async def test_the_lane_marks_a_task_and_the_tasks_it_starts_only() -> None:
    async def child() -> bool:
        return in_processing_lane()

    async def processing() -> tuple[bool, bool]:
        enter_processing_lane()
        return in_processing_lane(), await asyncio.create_task(child())

    assert await asyncio.create_task(processing()) == (True, True)
    assert not in_processing_lane()  # the caller's context is untouched
    assert not await asyncio.create_task(child())
