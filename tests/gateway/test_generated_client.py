"""A client generated from an instance's OpenAPI description (openapi-python-client) works
unchanged against the gateway: same operationIds, same paths, same shapes."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from uuid import UUID

from tests.gateway.conftest import BackendServer, GatewayFactory, create, wait_finished

BIN = Path(sys.executable).parent


def generate(document: dict[str, object], directory: Path, package: str) -> ModuleType:
    """Generate a client package from ``document`` and import it."""
    spec = directory / "openapi.json"
    spec.write_text(json.dumps(document))
    completed = subprocess.run(
        [
            str(BIN / "openapi-python-client"),
            "generate",
            "--path",
            str(spec),
            "--output-path",
            str(directory / package),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    sys.path.insert(0, str(directory))
    try:
        return importlib.import_module(package)
    finally:
        sys.path.remove(str(directory))


async def test_a_client_generated_from_an_instance_works_against_the_gateway(
    trio: list[BackendServer], make_gateway: GatewayFactory, tmp_path: Path
) -> None:
    async with trio[0].client() as direct:
        document = (await direct.get("/openapi/v1.json")).json()
    generated = generate(document, tmp_path, "instance_client")
    gateway = await make_gateway(trio)
    operation_id = await create(gateway, "gamma-import", "name\nok\nfail-1\n")
    await wait_finished(gateway, operation_id)
    bulks = importlib.import_module("instance_client.api.bulks")
    operations_api = importlib.import_module("instance_client.api.operations")
    get_operations = importlib.import_module(f"{operations_api.__name__}.get_operations")
    get_bulk_status = importlib.import_module(f"{bulks.__name__}.get_bulk_status")
    get_bulk_errors = importlib.import_module(f"{bulks.__name__}.get_bulk_errors")
    client = generated.Client(base_url=str(gateway.base_url))

    async with client as opened:
        descriptors = await get_operations.asyncio(client=opened)
        status = await get_bulk_status.asyncio(id=UUID(operation_id), client=opened)
        errors = await get_bulk_errors.asyncio(id=UUID(operation_id), client=opened)

    assert {d.name for d in descriptors} >= {"alpha-import", "beta-import", "gamma-import"}
    assert (status.status.value, status.processed_rows, status.error_count) == (
        "CompletedWithErrors",
        2,
        1,
    )
    assert [row.row_number for row in errors.items] == [2]
