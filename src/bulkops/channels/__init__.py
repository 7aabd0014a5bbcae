"""Notification channels (adapters that send an outbox delivery somewhere) and the
dispatcher that sends due deliveries.

The built-in ``webhook`` channel POSTs JSON; other channels are plug-ins registered by name
under the entry-point group ``bulkops.channels``: the entry point's name is the channel's
name, and it loads an object with an async ``send(delivery) -> Outcome`` (or a callable
returning one).
"""

from bulkops.channels.base import Channel, Outcome
from bulkops.channels.registry import channel_names, load_channels

__all__ = ["Channel", "Outcome", "channel_names", "load_channels"]
