"""The multipart form of create and validate: its fields and its file part."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel

FileInput = str | Path | IO[bytes]
Metadata = Mapping[str, Any] | BaseModel | None
# A form part: (file name, content, media type), or (None, text) for a plain field.
Part = tuple[str | None, Any] | tuple[str, IO[bytes], str]

MEDIA_TYPES = {
    ".csv": "text/csv",
    ".json": "application/json",
    ".jsonl": "application/x-ndjson",
    ".ndjson": "application/x-ndjson",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".gz": "application/gzip",
}


def metadata_json(metadata: Metadata) -> str:
    """The ``metadata`` field: a dict or a model as JSON (``{}`` when None)."""
    if metadata is None:
        return "{}"
    if isinstance(metadata, BaseModel):
        return metadata.model_dump_json(by_alias=True)
    return json.dumps(dict(metadata))


def form_fields(**values: Any) -> list[tuple[str, Part]]:
    """Plain form fields as multipart parts (left out when None), so a create without a
    file part is still ``multipart/form-data`` as the server expects."""
    fields: list[tuple[str, Part]] = []
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, Mapping):
            text = json.dumps(dict(value))
        else:
            text = str(value)
        fields.append((name, (None, text)))
    return fields


class FilePart:
    """The ``file`` form part: (name, file object, media type); opens a path and closes it."""

    def __init__(self, file: FileInput) -> None:
        self._file = file
        self._opened: IO[bytes] | None = None

    def __enter__(self) -> tuple[str, IO[bytes], str]:
        handle: IO[bytes]
        if isinstance(self._file, str | Path):
            path = Path(self._file)
            self._opened = handle = path.open("rb")
            name = path.name
        else:
            handle = self._file
            name = Path(str(getattr(handle, "name", "upload.csv"))).name
        media = MEDIA_TYPES.get(Path(name).suffix.lower(), "application/octet-stream")
        return name, handle, media

    def __exit__(self, *_: object) -> None:
        if self._opened is not None:
            self._opened.close()
