"""Command line: ``python -m benchmarks.run [--quick] [--only N,...] [--out FILE] [--profile]``."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import report
from benchmarks.context import FULL, QUICK, Context
from benchmarks.profilers import CPROFILE, PYSPY
from benchmarks.results import ERROR
from benchmarks.scenarios import SCENARIOS

RESULTS = Path(__file__).resolve().parents[1] / "bench-results"


def _numbers(text: str) -> set[int]:
    try:
        chosen = {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,3,6, got {text!r}") from None
    known = {scenario.number for scenario in SCENARIOS}
    if not chosen or not chosen <= known:
        raise argparse.ArgumentTypeError(f"scenarios are {sorted(known)}, got {text!r}")
    return chosen


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command's options."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description="Benchmark a real bulkops service."
    )
    parser.add_argument("--quick", action="store_true", help="small inputs: a smoke check")
    parser.add_argument("--only", type=_numbers, help="scenario numbers, e.g. 1,3,6")
    parser.add_argument("--out", type=Path, help="JSON file (default bench-results/latest.json)")
    profile = parser.add_mutually_exclusive_group()
    profile.add_argument(
        "--profile", dest="profile", action="store_true", default=None,
        help="profile scenarios 1 and 3 in an extra run each (default in the full run)",
    )  # fmt: skip
    profile.add_argument("--no-profile", dest="profile", action="store_false")
    parser.add_argument(
        "--profiler", choices=(CPROFILE, PYSPY), default=CPROFILE,
        help="cprofile (in the service, always available) or py-spy (sampling, if installed)",
    )  # fmt: skip
    parser.add_argument(
        "--inputs", type=Path, default=RESULTS / "inputs", help="where generated files are kept"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the chosen scenarios, print the table, write the JSON; 1 when one errored."""
    args = parse_args(argv)
    sizes = QUICK if args.quick else FULL
    out: Path = args.out or RESULTS / ("latest-quick.json" if args.quick else "latest.json")
    profile = (not args.quick) if args.profile is None else args.profile
    context = Context(
        sizes=sizes,
        input_dir=args.inputs,
        profiler=args.profiler if profile else None,
        profile_dir=out.parent,
    )
    started, clock = report.now(), time.perf_counter()
    outcomes = []
    with context:  # stops the services kept from plain runs
        for scenario in SCENARIOS:
            if args.only and scenario.number not in args.only:
                continue
            print(f"scenario {scenario.number}: {scenario.title_for(sizes)} ...", flush=True)
            begun = time.perf_counter()
            result = scenario.run(context)
            outcomes.append(report.Outcome(scenario, result, time.perf_counter() - begun))
            print(f"  {result.verdict} in {time.perf_counter() - begun:.1f} s", flush=True)
    elapsed = time.perf_counter() - clock
    print()
    print(report.header(context, started))
    print()
    print(report.table(outcomes, context))
    print()
    print(report.details(outcomes))
    document = report.document(outcomes, context, started, elapsed)
    report.write_json(out, document)
    if document["source"]["srcChangedDuringRun"]:
        print("\nWARNING: files under src/bulkops changed during the run", file=sys.stderr)
    print(f"\n{len(outcomes)} scenarios in {elapsed:.0f} s; figures written to {out}")
    return 1 if any(outcome.result.verdict == ERROR for outcome in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
