"""The gateway: one address over several bulkops services (``bulkops gateway``)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from bulkops.gateway.settings import GatewaySettings

if TYPE_CHECKING:
    from bulkops.gateway.app import create_gateway
    from bulkops.gateway.backend import OutgoingHook

__all__ = ["GatewaySettings", "OutgoingHook", "create_gateway"]

# The app (FastAPI, httpx pools) is imported on first use: `bulkops --help` stays quick.
_LAZY = {"create_gateway": "bulkops.gateway.app", "OutgoingHook": "bulkops.gateway.backend"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bulkops.gateway' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
