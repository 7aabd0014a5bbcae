"""Notification options submitted with an operation (the ``notifications`` form field)."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from bulkops.errors import BadRequest
from bulkops.storage.deliveries import DEFAULT_TRIGGERS, expand_triggers


class Recipient(BaseModel):
    """One destination of notifications."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    channel: str = Field(min_length=1)
    target: str = Field(min_length=1)
    triggers: list[str] = Field(default_factory=lambda: list(DEFAULT_TRIGGERS))

    @field_validator("triggers")
    @classmethod
    def _known_triggers(cls, value: list[str]) -> list[str]:
        return expand_triggers(value)


class NotificationOptions(BaseModel):
    """The whole ``notifications`` object."""

    model_config = ConfigDict(extra="forbid")

    recipients: list[Recipient] = Field(default_factory=list)


def parse_notifications(
    text: str | None, channels: Collection[str] | None = None
) -> dict[str, Any] | None:
    """Validate the ``notifications`` form value; None when absent. With ``channels``,
    every recipient must name one of them.

    Raises:
        BadRequest: the value is not JSON, does not match the expected structure, or names
            an unknown channel or trigger.
    """
    if text is None or not text.strip():
        return None
    try:
        options = NotificationOptions.model_validate(json.loads(text))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise BadRequest(f"Malformed notifications: {exc}") from None
    except (ValueError, RecursionError):
        raise BadRequest("Malformed notifications: not valid JSON") from None
    if channels is not None:
        for recipient in options.recipients:
            if recipient.channel not in channels:
                known = ", ".join(sorted(channels)) or "none"
                raise BadRequest(
                    f"Unknown notification channel {recipient.channel!r} (channels: {known})"
                )
    return options.model_dump(by_alias=True)
