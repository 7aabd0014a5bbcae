"""The gateway's API description: the instance's own, plus the gateway's two additions.

Derived from the instance app at run time rather than declared again, so the two cannot
drift: same paths, verbs, schemas and operationIds, and a client generated from either works
against both.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

SOURCE_SERVICE_PROPERTY: dict[str, Any] = {
    "type": "string",
    "title": "Sourceservice",
    "description": "Gateway only: the name of the backend that serves the operation.",
}
SOURCE_PARAMETER: dict[str, Any] = {
    "name": "source",
    "in": "query",
    "required": False,
    "schema": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Source"},
    "description": "Gateway only: list the operations of this backend alone, paged natively.",
}
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# Routes of an instance about the instance itself: a gateway does not serve them (scrape
# each backend's /metrics).
INSTANCE_ONLY = ("/metrics",)
# The submission forms, whose ``oneOf`` holds one variant per operation a service runs.
SUBMISSION_PATHS = ("/api/bulks", "/api/bulks/validate")


@functools.cache
def _instance_description() -> dict[str, Any]:
    # Building the app only declares its routes: nothing is opened until its lifespan runs.
    from bulkops.api.app import create_app
    from bulkops.settings import Settings

    return create_app(settings=Settings.model_construct(openapi_enabled=True)).openapi()


def instance_description() -> dict[str, Any]:
    """The API description of an instance (a fresh copy)."""
    return copy.deepcopy(_instance_description())


def gateway_description(backend_documents: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The instance's description plus ``sourceService`` on operation descriptors and the
    ``source`` query parameter of the operation list.

    With ``backend_documents`` (the backends' own descriptions), the create and validate
    forms offer the operations those backends serve, instead of this installation's own.
    """
    document = instance_description()
    for path in INSTANCE_ONLY:
        document["paths"].pop(path, None)
    if backend_documents is not None:
        _offer_backend_operations(document, backend_documents)
    descriptor = document["components"]["schemas"]["OperationDescriptor"]
    descriptor["properties"]["sourceService"] = SOURCE_SERVICE_PROPERTY
    document["paths"]["/api/bulks"]["get"].setdefault("parameters", []).append(SOURCE_PARAMETER)
    return document


def instance_routes() -> list[tuple[str, list[str]]]:
    """Every route of an instance: its path template and upper-case methods."""
    paths: dict[str, dict[str, Any]] = _instance_description()["paths"]
    return [
        (path, [method.upper() for method in item if method in HTTP_METHODS])
        for path, item in paths.items()
    ]


def _submission_schema(document: dict[str, Any], path: str) -> dict[str, Any] | None:
    try:
        schema = document["paths"][path]["post"]["requestBody"]["content"]["multipart/form-data"]
        found: dict[str, Any] = schema["schema"]
    except (KeyError, TypeError):
        return None
    return found


def _offer_backend_operations(document: dict[str, Any], backends: list[dict[str, Any]]) -> None:
    """Replace the forms' operation variants by the backends' (first backend wins a name),
    with the component schemas those variants refer to."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for path in SUBMISSION_PATHS:
        ours = _submission_schema(document, path)
        if ours is None:
            continue
        variants: dict[str, Any] = {}
        for backend in backends:
            theirs = _submission_schema(backend, path)
            for variant in (theirs or {}).get("oneOf", []):
                if isinstance(variant, dict):
                    variants.setdefault(str(variant.get("title")), variant)
        ours["oneOf"] = list(variants.values())
    for backend in backends:
        for name, schema in backend.get("components", {}).get("schemas", {}).items():
            schemas.setdefault(name, schema)  # operation models are prefixed by their name
