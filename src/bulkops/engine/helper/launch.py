"""Starting and ending a row helper process: the child, and the hello it answers once it
has loaded the operations, before it takes a job."""

from __future__ import annotations

import asyncio
import contextlib
import sys

from bulkops.engine.helper.messages import Hello, HelperLost, Ready, receive, send

START_TIMEOUT = 60.0  # seconds for a helper to import its operations
CLOSE_TIMEOUT = 5.0  # seconds for a helper to exit once its stdin closes


async def launch(hello: Hello) -> asyncio.subprocess.Process:
    """Start a helper process and wait until it has loaded the operations of ``hello``.

    Raises:
        HelperLost: it exited or failed to load them (it is ended).
    """
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bulkops.engine.helper_child",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        async with asyncio.timeout(START_TIMEOUT):
            try:
                await send(process.stdin, hello)
            except (ConnectionError, RuntimeError) as exc:
                kill(process)
                raise HelperLost(f"its pipe closed: {exc}") from None
            ready = await receive(process.stdout)
    except (HelperLost, TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
        await end(process)
        raise HelperLost(f"did not start: {exc or 'timed out'}") from None
    except BaseException:  # cancelled: leave no process behind
        kill(process)
        raise
    if not isinstance(ready, Ready) or ready.error is not None:
        await end(process)
        error = ready.error if isinstance(ready, Ready) else type(ready).__name__
        raise HelperLost(f"could not load the operations: {error}")
    return process


async def end(process: asyncio.subprocess.Process) -> None:
    """Close the helper's stdin (it exits at once, even mid-job) and wait for it to end;
    killed when it does not within ``CLOSE_TIMEOUT``."""
    if process.stdin is not None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            process.stdin.close()
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await process.wait()
    except TimeoutError:
        process.kill()
        await process.wait()


def kill(process: asyncio.subprocess.Process) -> None:
    """End the helper at once (one that already exited is left as it is)."""
    with contextlib.suppress(ProcessLookupError):
        process.kill()
