"""The published API description (``/openapi/v1.json``), made to match what the service does.

Routes declare the answers particular to them (404, 409, 413, 415, 422) in their decorators.
This module adds what follows from the app as a whole, so no route can forget it:

- 400 wherever a query parameter can be malformed (FastAPI's own 422 entry is replaced:
  this service answers request errors with 400 and the error body);
- 503 (storage or key server unavailable) and, when a policy guards the route, 401/403
  with the bearer security scheme;
- the multipart body of create and validate, per registered operation: its name, its
  metadata model, the file part and its accepted media types;
- OpenAPI ``links`` from createBulk's 201 to every ``{id}`` route, so clients and fuzzers
  follow real operation ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from bulkops.api.auth import AccessControl
from bulkops.api.auth.middleware import required_access
from bulkops.api.schemas import ErrorBody
from bulkops.channels.registry import channel_names
from bulkops.definition.operation import OperationDefinition
from bulkops.definition.registry import Registry
from bulkops.service.notifications import NotificationOptions
from bulkops.storage.deliveries import SHORTHANDS, TRIGGERS

JsonObject = dict[str, Any]

SECURITY_SCHEME = "bearerAuth"
FILE_MEDIA_TYPES = (
    "text/csv, application/json, application/x-ndjson, "
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
)
_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
_GENERIC_ERRORS = {
    400: "Malformed request (a query value, body or form field)",
    401: "No bearer credential, or one that is not valid",
    403: "The credential lacks the right (read or operate)",
    503: "Storage (or the token issuer's keys) unavailable; try again later",
    507: "Storage full (a full disk); nothing was stored",
}


def install_openapi(app: FastAPI, registry: Registry, access: AccessControl) -> None:
    """Serve the completed description from ``app.openapi()`` (built once, then cached)."""

    def openapi() -> JsonObject:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            complete(schema, registry, access)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def complete(schema: JsonObject, registry: Registry, access: AccessControl) -> None:
    """Add what every route answers, the submission bodies, security and links."""
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas.setdefault("ErrorBody", ErrorBody.model_json_schema(by_alias=True))
    for path, method, operation in _operations(schema):
        _describe_answers(path, method, operation, access)
    if access.bearer:
        components["securitySchemes"] = {
            SECURITY_SCHEME: {
                "type": "http",
                "scheme": "bearer",
                "description": "A static token (BULKOPS_AUTH_TOKENS) or a JWT",
            }
        }
    by_id = {op.get("operationId"): op for _, _, op in _operations(schema)}
    for operation_id, extra in (("createBulk", True), ("validateBulk", False)):
        if operation_id in by_id:
            by_id[operation_id]["requestBody"] = submission_body(registry, schemas, extra=extra)
    if "createBulk" in by_id:
        _link_created(by_id["createBulk"], schema)
        _idempotency(by_id["createBulk"])
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)


def _operations(schema: JsonObject) -> Iterable[tuple[str, str, JsonObject]]:
    for path, item in schema.get("paths", {}).items():
        for method in _METHODS:
            if method in item:
                yield path, method, item[method]


def _describe_answers(path: str, method: str, operation: JsonObject, access: AccessControl) -> None:
    responses: JsonObject = operation.setdefault("responses", {})
    validation = responses.get("422", {})
    if "HTTPValidationError" in str(validation):
        del responses["422"]  # FastAPI's default; request errors are 400 here
    codes: list[int] = []
    if any(p.get("in") == "query" for p in operation.get("parameters", [])):
        codes.append(400)
    needed = required_access(method, path)
    if needed is not None:
        codes.append(503)
        if method != "get":  # a write on a full disk
            codes.append(507)
        if access.guards(needed):
            codes += [401, 403]
            if access.bearer:
                operation["security"] = [{SECURITY_SCHEME: []}]
    for code in codes:
        answer = responses.setdefault(str(code), {"description": _GENERIC_ERRORS[code]})
        answer.setdefault("content", {"application/json": {"schema": _ERROR_REF}})


def _idempotency(create: JsonObject) -> None:
    """The ``Idempotency-Key`` request header and the replay answer of create."""
    create.setdefault("parameters", []).append(
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "description": "A retried create with the same key (and the same request) "
            "creates nothing and answers the first operation",
            "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]+$"},
        }
    )
    created = create["responses"].setdefault("201", {"description": "Created"})
    created.setdefault("headers", {})["Idempotent-Replayed"] = {
        "description": "true when the answer replays an earlier request with the same key",
        "schema": {"type": "string"},
    }
    invalid = create["responses"].get("422", {}).get("content", {}).get("application/json")
    if invalid is not None:
        reused: JsonObject = {
            "title": "IdempotencyKeyReused",
            "type": "object",
            "required": ["error", "operationId"],
            "properties": {
                "error": {"type": "string"},
                "operationId": {
                    "type": "string",
                    "format": "uuid",
                    "description": "The operation the key created first",
                },
            },
        }
        invalid["schema"] = {"anyOf": [invalid["schema"], reused]}
        create["responses"]["422"]["description"] = (
            "The metadata or column map does not fit the operation, or the Idempotency-Key "
            "was used with a different request"
        )


def _link_created(create: JsonObject, schema: JsonObject) -> None:
    created = create["responses"].setdefault("201", {"description": "Created"})
    created.setdefault("headers", {})["Location"] = {
        "description": "The new operation: /api/bulks/{id}",
        "schema": {"type": "string"},
    }
    links: JsonObject = {}
    for path, _, operation in _operations(schema):
        operation_id = operation.get("operationId")
        # An action's {id} names the action, not an operation.
        if "{id}" in path and operation_id and not path.startswith("/api/actions/"):
            links[operation_id[0].upper() + operation_id[1:]] = {
                "operationId": operation_id,
                "parameters": {"id": "$response.body#/operationId"},
            }
    created["links"] = links


def submission_body(registry: Registry, schemas: JsonObject, *, extra: bool) -> JsonObject:
    """The multipart body of create (``extra``: with notifications and createdBy) or
    validate.

    The file part (and the optional fields) are common; ``oneOf`` holds one variant per
    registered operation that ties its name to its metadata model. The name and metadata
    are described only in the variants, so each constraint lives in one place.
    """
    properties: JsonObject = {
        "file": {
            "type": "string",
            "format": "binary",
            "minLength": 1,
            "description": "CSV, JSON array, JSON Lines or XLSX, told by the file name's "
            "extension (.csv, .json, .jsonl, .ndjson, .xlsx), else by the part's content "
            "type; gzip-compressed when the name ends with .gz or the type is "
            "application/gzip (the format then comes from the name without .gz)",
        },
    }
    properties["columnMap"] = {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": "File column -> row field (alias or name), applied before matching",
    }
    properties["sheet"] = {
        "type": "string",
        "description": "The XLSX worksheet to read (default: the first); only for XLSX files",
    }
    properties["mapping"] = {
        "type": "string",
        "description": "Instead of columnMap: the column map saved under this name for the "
        "operation (PUT /api/operations/{name}/mappings/{mapping}); unknown: 400",
    }
    properties["sourceUrl"] = {
        "type": "string",
        "description": "Instead of a file: s3://bucket/key (when the file store is S3) or "
        "an http(s) URL starting with a prefix of BULKOPS_SOURCE_URL_ALLOW; streamed in "
        "under the upload limit (413), fileName from its last segment; 400 when not "
        "allowed (nothing fetched), 502 when the source fails",
    }
    encoding: JsonObject = {
        "file": {"contentType": FILE_MEDIA_TYPES},
        "metadata": {"contentType": "application/json"},
        "columnMap": {"contentType": "application/json"},
    }
    if extra:
        properties["notifications"] = notifications_schema()
        properties["createdBy"] = {
            "type": "string",
            "description": "Creator for anonymous use; ignored when a policy is configured",
        }
        properties["priority"] = {
            "type": "integer",
            "minimum": -10,
            "maximum": 10,
            "default": 0,
            "description": "Higher runs first (lower priorities with work still get a tenth)",
        }
        encoding["notifications"] = {"contentType": "application/json"}
        properties["dryRun"] = {
            "type": "string",
            "enum": ["true", "false"],
            "description": "true: validate the metadata and every row, run nothing",
        }
        properties["sourceOperationId"] = {
            "type": "string",
            "format": "uuid",
            "description": "Instead of a file: read this operation's stored file, with its "
            "fixed rows' data (same operation name; metadata and columnMap default to its "
            "own). 404 when unknown",
        }
        properties["rejectDuplicate"] = {
            "type": "string",
            "enum": ["true", "false"],
            "description": "true: 409 (naming it in duplicateOf) when an operation of the "
            "same name and tenant already had a file with this file's SHA-256",
        }
    body_schema: JsonObject = {
        "type": "object",
        "required": [] if extra else ["file"],
        "properties": properties,
        "oneOf": [_variant(d, schemas) for d in registry],
    }
    # A file, or the operation whose stored file to read: exactly one of them. (A sourceUrl
    # replaces the file too; the shapes stay those of a file upload, which every client
    # sends, so generated requests keep sending a file.)
    if extra:
        body_schema["allOf"] = [
            {"oneOf": [{"required": ["file"]}, {"required": ["sourceOperationId"]}]}
        ]
    return {
        "required": True,
        "content": {"multipart/form-data": {"schema": body_schema, "encoding": encoding}},
    }


def _variant(definition: OperationDefinition, schemas: JsonObject) -> JsonObject:
    prefix = re.sub(r"[^A-Za-z0-9._-]", "_", definition.name) + "."
    metadata = definition.metadata_model.model_json_schema(
        by_alias=True, ref_template=f"#/components/schemas/{prefix}{{model}}"
    )
    for name, nested in metadata.pop("$defs", {}).items():
        schemas[prefix + name] = nested
    metadata["description"] = (
        f"Metadata of {definition.name}: a JSON object (a missing part counts as {{}})"
    )
    required = ["operationName"]
    if metadata.get("required"):
        required.append("metadata")
    return {
        "title": definition.name,
        "type": "object",
        "required": required,
        "properties": {
            "operationName": {
                "type": "string",
                "const": definition.name,
                "description": "A registered operation (GET /api/operations)",
            },
            "metadata": metadata,
        },
    }


def notifications_schema() -> JsonObject:
    """The ``notifications`` field: recipients with a channel, a target and triggers."""
    schema = NotificationOptions.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
    recipient = schema.pop("$defs", {}).get("Recipient", {})
    channel = recipient.get("properties", {}).get("channel")
    if isinstance(channel, dict):
        channel["enum"] = channel_names()
    triggers = recipient.get("properties", {}).get("triggers")
    if isinstance(triggers, dict):
        triggers["items"] = {"type": "string", "enum": [*TRIGGERS, *SHORTHANDS]}
    recipients = schema.get("properties", {}).get("recipients")
    if isinstance(recipients, dict):
        recipients["items"] = recipient
    schema["description"] = "JSON notification options"
    return schema
