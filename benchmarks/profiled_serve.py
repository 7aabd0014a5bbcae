"""``bulkops serve`` under cProfile, switched on by SIGUSR1 and off (and saved) by SIGUSR2.

Usage: ``python -m benchmarks.profiled_serve OUT.prof [serve flags...]``. Settings come from
the ``BULKOPS_*`` environment as usual. Only the main thread (event loop) is profiled, so
the processing runs in it (``--worker-processes 0``, unless the flags say otherwise).
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
from pathlib import Path
from types import FrameType


def main() -> None:
    """Install the signal handlers, then run the real ``bulkops serve`` command."""
    out = Path(sys.argv[1])
    profiler = cProfile.Profile()

    def start(_signum: int, _frame: FrameType | None) -> None:
        profiler.enable()

    def stop(_signum: int, _frame: FrameType | None) -> None:
        profiler.disable()
        partial = out.with_suffix(".partial")
        profiler.dump_stats(partial)
        os.replace(partial, out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = ["bulkops", "serve", "--worker-processes", "0", *sys.argv[2:]]
    from bulkops.cli.main import main as bulkops_main

    bulkops_main()


if __name__ == "__main__":
    main()
