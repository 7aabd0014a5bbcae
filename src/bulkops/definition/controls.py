"""Operation controls declared on ``@operation`` and ``@step``: failure thresholds, batches,
rate limits, the CSV dialect and the schema version."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bulkops.errors import DefinitionError

# The CSV delimiters an operation may declare, and that readers detect.
CSV_DELIMITERS = (",", ";", "\t", "|")

DEFAULT_BATCH_SIZE = 100
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([smh])\s*$")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``count`` calls start in any window of ``period`` seconds."""

    count: int
    period: float
    text: str

    @classmethod
    def parse(cls, text: str, what: str) -> RateLimit:
        """Read ``"20/s"``, ``"100/m"``, ``"1000/h"`` (or ``"5/10s"``: 5 per 10 seconds).

        Raises:
            DefinitionError: the text is not a rate.
        """
        found = _RATE.match(text) if isinstance(text, str) else None
        if found is None:
            raise DefinitionError(
                f"{what}: rate_limit must look like '20/s', '100/m' or '1000/h', got {text!r}"
            )
        count, multiple, unit = int(found[1]), int(found[2] or 1), found[3]
        if count < 1 or multiple < 1:
            raise DefinitionError(f"{what}: rate_limit must allow at least 1 call per window")
        return cls(count=count, period=multiple * _UNITS[unit], text=text.strip())


@dataclass(frozen=True, slots=True)
class OperationControls:
    """The controls of one operation (all optional)."""

    tolerated_failure_count: int | None = None
    tolerated_failure_percentage: float | None = None
    batch_size: int | None = None
    rate_limit: RateLimit | None = None
    csv_delimiter: str | None = None
    schema_version: str | None = None

    @property
    def limits_failures(self) -> bool:
        """Whether the operation stops starting rows after too many failed."""
        return (
            self.tolerated_failure_count is not None
            or self.tolerated_failure_percentage is not None
        )

    def failure_limit_passed(self, failed: int, total: int) -> str | None:
        """A message naming the threshold once more rows failed than tolerated, else None."""
        count, percentage = self.tolerated_failure_count, self.tolerated_failure_percentage
        if count is not None and failed > count:
            return (
                f"{failed} rows failed, more than the tolerated failure count of {count}; "
                "no further rows were started"
            )
        if percentage is not None and total > 0 and failed * 100 > percentage * total:
            return (
                f"{failed} of {total} rows failed, more than the tolerated failure percentage "
                f"of {percentage:g}%; no further rows were started"
            )
        return None


def build_controls(
    name: str,
    *,
    tolerated_failure_count: int | None,
    tolerated_failure_percentage: float | None,
    batch_size: int | None,
    rate_limit: str | None,
    csv_delimiter: str | None,
    schema_version: str | None,
) -> OperationControls:
    """Check the declared controls of operation ``name`` (raises ``DefinitionError``)."""
    what = f"Operation {name!r}"
    if tolerated_failure_count is not None and (
        not isinstance(tolerated_failure_count, int) or tolerated_failure_count < 0
    ):
        raise DefinitionError(f"{what}: tolerated_failure_count must be a non-negative integer")
    if tolerated_failure_percentage is not None and not (
        isinstance(tolerated_failure_percentage, int | float)
        and 0 <= tolerated_failure_percentage <= 100
    ):
        raise DefinitionError(f"{what}: tolerated_failure_percentage must be between 0 and 100")
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise DefinitionError(f"{what}: batch_size must be a positive integer")
    if csv_delimiter is not None and csv_delimiter not in CSV_DELIMITERS:
        shown = ", ".join(repr(d) for d in CSV_DELIMITERS)
        raise DefinitionError(f"{what}: csv_delimiter must be one of {shown}")
    if schema_version is not None and (not isinstance(schema_version, str) or not schema_version):
        raise DefinitionError(f"{what}: schema_version must be a non-empty string")
    return OperationControls(
        tolerated_failure_count=tolerated_failure_count,
        tolerated_failure_percentage=(
            None if tolerated_failure_percentage is None else float(tolerated_failure_percentage)
        ),
        batch_size=batch_size,
        rate_limit=None if rate_limit is None else RateLimit.parse(rate_limit, what),
        csv_delimiter=csv_delimiter,
        schema_version=schema_version,
    )
