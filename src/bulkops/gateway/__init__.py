"""The gateway: one address over several bulkops services (``bulkops gateway``)."""

from __future__ import annotations

from bulkops.gateway.app import create_gateway
from bulkops.gateway.backend import OutgoingHook
from bulkops.gateway.settings import GatewaySettings

__all__ = ["GatewaySettings", "OutgoingHook", "create_gateway"]
