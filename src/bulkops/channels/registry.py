"""The channels a process can send through: the webhook, and plug-ins by entry point."""

from __future__ import annotations

import logging
from importlib.metadata import entry_points
from typing import Any

from bulkops.channels.base import Channel
from bulkops.channels.webhook import WebhookChannel

GROUP = "bulkops.channels"
log = logging.getLogger("bulkops.channels")


def channel_names() -> list[str]:
    """The names recipients may use: ``webhook`` and each ``bulkops.channels`` entry point's
    name."""
    return ["webhook", *sorted({point.name for point in entry_points(group=GROUP)} - {"webhook"})]


def load_channels(*, webhook_secret: str | None, webhook_allow_private: bool) -> dict[str, Channel]:
    """Every channel by name: ``webhook`` and those of the ``bulkops.channels`` entry points
    (an object with ``send``, or a callable returning one), named by the entry point."""
    channels: dict[str, Channel] = {
        "webhook": WebhookChannel(secret=webhook_secret, allow_private=webhook_allow_private)
    }
    for point in entry_points(group=GROUP):
        try:
            loaded: Any = point.load()
            channel = loaded() if callable(loaded) and not hasattr(loaded, "send") else loaded
        except Exception:
            log.exception("Notification channel plug-in %r could not be loaded", point.name)
            continue
        channels[point.name] = channel
    return channels
