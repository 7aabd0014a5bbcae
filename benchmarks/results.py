"""What a scenario produces: figures, ratios to the reference, and checked targets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PASS, MISS, SKIP, ERROR = "PASS", "MISS", "SKIP", "ERROR"
Figure = int | float | str


@dataclass(frozen=True)
class Check:
    """One target: ``value`` must be at least (or at most) ``limit``."""

    label: str
    value: float
    limit: float
    at_least: bool
    unit: str = ""

    @property
    def passed(self) -> bool:
        """Whether the measured value meets the target."""
        return self.value >= self.limit if self.at_least else self.value <= self.limit

    @property
    def verdict(self) -> str:
        """PASS or MISS."""
        return PASS if self.passed else MISS

    def to_json(self) -> dict[str, Any]:
        """The check as plain JSON data."""
        return {
            "label": self.label,
            "value": round(self.value, 4),
            "limit": self.limit,
            "comparison": ">=" if self.at_least else "<=",
            "unit": self.unit,
            "verdict": self.verdict,
        }


def at_least(label: str, value: float, limit: float, unit: str = "") -> Check:
    """A check that passes when ``value >= limit``."""
    return Check(label, value, limit, at_least=True, unit=unit)


def at_most(label: str, value: float, limit: float, unit: str = "") -> Check:
    """A check that passes when ``value <= limit``."""
    return Check(label, value, limit, at_least=False, unit=unit)


@dataclass
class Result:
    """The outcome of one scenario."""

    figures: dict[str, Figure] = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    breakdown: dict[str, Any] | None = None
    skipped: str | None = None
    error: str | None = None

    @property
    def verdict(self) -> str:
        """SKIP, ERROR, else PASS when every check passes and MISS otherwise."""
        if self.skipped is not None:
            return SKIP
        if self.error is not None:
            return ERROR
        return PASS if all(check.passed for check in self.checks) else MISS

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON data."""
        body: dict[str, Any] = {
            "verdict": self.verdict,
            "figures": self.figures,
            "ratios": {name: round(value, 4) for name, value in self.ratios.items()},
            "checks": [check.to_json() for check in self.checks],
            "notes": self.notes,
        }
        if self.breakdown is not None:
            body["breakdown"] = self.breakdown
        if self.skipped is not None:
            body["skipped"] = self.skipped
        if self.error is not None:
            body["error"] = self.error
        return body
