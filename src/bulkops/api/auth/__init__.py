"""Access control: bearer credentials (static tokens, JWT), read and operate policies.

``AccessControl`` is built from settings by the app factory; ``AccessMiddleware``
(``bulkops.api.auth.middleware``) applies it to every request before routing. Custom
policies and user resolvers receive the request and find the caller with
``principal_of(request)``.
"""

from __future__ import annotations

from bulkops.api.auth.control import AccessControl, UserResolver, bearer_token
from bulkops.api.auth.errors import (
    AuthConfigurationError,
    KeysUnavailable,
    NotAuthenticated,
    PermissionDenied,
)
from bulkops.api.auth.policies import Policy
from bulkops.api.auth.principal import Access, Principal, principal_of
from bulkops.api.auth.tenants import Tenancy, TenantResolver, TenantUnknown

__all__ = [
    "Access",
    "AccessControl",
    "AuthConfigurationError",
    "KeysUnavailable",
    "NotAuthenticated",
    "PermissionDenied",
    "Policy",
    "Principal",
    "Tenancy",
    "TenantResolver",
    "TenantUnknown",
    "UserResolver",
    "bearer_token",
    "principal_of",
]
