"""Notification options submitted with an operation (the ``notifications`` form field)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from bulkops.errors import BadRequest

TRIGGERS = (
    "OnCompletion",
    "OnCompletionWithErrors",
    "OnFailure",
    "OnCancelled",
    "OnStatusChange",
)
SHORTHANDS = {
    "OnTerminal": ("OnCompletion", "OnCompletionWithErrors", "OnFailure", "OnCancelled"),
    "All": TRIGGERS,
}


class Recipient(BaseModel):
    """One destination of notifications."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    channel: str = Field(min_length=1)
    target: str = Field(min_length=1)
    triggers: list[str] = Field(default_factory=lambda: ["OnFailure"])

    @field_validator("triggers")
    @classmethod
    def _known_triggers(cls, value: list[str]) -> list[str]:
        expanded: list[str] = []
        for name in value:
            if name in SHORTHANDS:
                expanded.extend(SHORTHANDS[name])
            elif name in TRIGGERS:
                expanded.append(name)
            else:
                raise ValueError(f"unknown trigger {name!r}")
        return list(dict.fromkeys(expanded))


class NotificationOptions(BaseModel):
    """The whole ``notifications`` object."""

    model_config = ConfigDict(extra="forbid")

    recipients: list[Recipient] = Field(default_factory=list)


def parse_notifications(text: str | None) -> dict[str, Any] | None:
    """Validate the ``notifications`` form value; None when absent.

    Raises:
        BadRequest: the value is not JSON or does not match the expected structure.
    """
    if text is None or not text.strip():
        return None
    try:
        options = NotificationOptions.model_validate(json.loads(text))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise BadRequest(f"Malformed notifications: {exc}") from None
    except (ValueError, RecursionError):
        raise BadRequest("Malformed notifications: not valid JSON") from None
    return options.model_dump(by_alias=True)
