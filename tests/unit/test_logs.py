"""Log lines carry the operation they are about, in text and in JSON."""

from __future__ import annotations

import asyncio
import io
import json
import logging

import pytest

from bulkops.observability.logs import JsonFormatter, OperationFilter, operation_scope


def capture(formatter: logging.Formatter) -> tuple[logging.Logger, io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(OperationFilter())
    handler.setFormatter(formatter)
    logger = logging.getLogger(f"bulkops.test.{id(out)}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, out


async def test_json_lines_name_the_operation_of_their_task_only() -> None:
    logger, out = capture(JsonFormatter())

    async def run(operation: str) -> None:
        operation_scope(operation)
        await asyncio.sleep(0)
        logger.info("row %d done", 7)

    await asyncio.gather(run("op-a"), run("op-b"))
    logger.warning("outside any operation")

    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert sorted(line.get("operationId") for line in lines[:2]) == ["op-a", "op-b"]
    assert lines[0]["message"] == "row 7 done" and lines[0]["level"] == "INFO"
    assert "operationId" not in lines[2] and lines[2]["time"].endswith("Z")


@pytest.mark.parametrize("inside", [True, False])
async def test_text_lines_end_with_the_operation_when_there_is_one(inside: bool) -> None:
    logger, out = capture(logging.Formatter("%(message)s%(operation_suffix)s"))

    async def run() -> None:
        if inside:
            operation_scope("op-c")
        logger.info("hello")

    await asyncio.create_task(run())

    assert out.getvalue().strip() == ("hello [operation op-c]" if inside else "hello")
