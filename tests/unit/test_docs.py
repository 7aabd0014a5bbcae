"""The documentation tells the truth: the tutorial's operation does what the tutorial says,
the generated reference lists everything the code has, and the README stays a front door.

`make docs` (part of `make test`) builds the site with --strict, which fails on a broken
link or a Python name the reference cannot find; these tests check what a build cannot.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import typer.main
from examples.tutorial.customers import InviteCustomers

import bulkops as bo
from bulkops.cli.main import app as cli_app
from bulkops.gateway import GatewaySettings
from bulkops.testing import run_operation_sync

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL_CSV = ROOT / "examples" / "tutorial" / "customers.csv"


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "tools" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("docs_hooks", module)
    spec.loader.exec_module(module)
    return module


def test_readme_is_a_front_door_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    assert "make run" in readme and "make test" in readme


def test_the_readmes_links_into_the_repository_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#]+?)(?:#[^)]*)?\)", readme)
    local = [target for target in targets if "://" not in target]
    assert local, "the README links into the documentation"
    assert [target for target in local if not (ROOT / target).exists()] == []


def test_the_tutorials_bad_rows_fail_validation_with_its_messages() -> None:
    lines = TUTORIAL_CSV.read_text().splitlines()
    header, rows = lines[0], lines[1:]
    bad = [row for row in rows if row.startswith(("edsger@", "barbara@"))]
    result = run_operation_sync(
        InviteCustomers, "\n".join([header, *bad]) + "\n", metadata={"campaign": "spring"}
    )
    messages = [row.error_message for row in result.failed_rows]
    assert messages == [
        "Invalid email address 'edsger@example'",
        "Unknown plan 'gold': use free, team, enterprise",
    ]
    assert all(row.error_type is bo.ErrorType.VALIDATION for row in result.failed_rows)


def test_the_tutorials_metadata_requires_a_campaign() -> None:
    with pytest.raises(bo.BulkOpsError, match="Metadata is invalid"):
        run_operation_sync(InviteCustomers, "email,name\na@example.com,A\n", metadata={})


async def _wait_for(client: httpx.AsyncClient, path: str, done: Any) -> Any:
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        body = (await client.get(path)).json()
        if done(body):
            return body
        assert asyncio.get_running_loop().time() < deadline, body
        await asyncio.sleep(0.02)


async def test_the_tutorials_rows_are_signalled_fixed_and_retried() -> None:
    settings = bo.Settings(database_url="memory://", files_url="memory://", max_row_concurrency=10)
    app = bo.create_app(operations=[InviteCustomers], settings=settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        created = await client.post(
            "/api/bulks",
            data={"operationName": "invite-customers", "metadata": '{"campaign": "spring"}'},
            files={"file": ("customers.csv", TUTORIAL_CSV.read_bytes(), "text/csv")},
        )
        bulk = created.json()["operationId"]
        waiting = await _wait_for(
            client,
            f"/api/bulks/{bulk}/rows?state=WaitingForCompletion",
            lambda page: page["totalCount"] == 3,
        )
        assert {item["currentStep"] for item in waiting["items"]} == {"Confirm email"}
        for email in ("ada@example.com", "alan@example.com", "grace@example.com"):
            answer = await client.post(f"/api/bulks/{bulk}/signal/{email}")
            assert answer.status_code == 200, answer.text
        final = await _wait_for(
            client,
            f"/api/bulks/{bulk}/status",
            lambda status: status["status"] not in {"Pending", "Running", "Retrying"},
        )
        assert final["status"] == "CompletedWithErrors" and final["errorCount"] == 2
        assert final["processedRows"] == 5

        # Section 8: fix the two rows whose data was wrong, retry them, confirm them.
        fixes = {
            4: {"email": "edsger@example.org", "name": "Edsger Dijkstra", "plan": "team"},
            5: {"email": "barbara@example.com", "name": "Barbara Liskov", "plan": "team"},
        }
        for number, data in fixes.items():
            fixed = await client.patch(
                f"/api/bulks/{bulk}/rows/{number}", json={"rowData": {**data, "seats": "2"}}
            )
            assert fixed.status_code == 200, fixed.text
        retried = await client.post(f"/api/bulks/{bulk}/retry")
        assert retried.json()["rowsSubmitted"] == 2
        await _wait_for(
            client,
            f"/api/bulks/{bulk}/rows?state=WaitingForCompletion",
            lambda page: page["totalCount"] == 2,
        )
        for data in fixes.values():
            answer = await client.post(f"/api/bulks/{bulk}/signal/{data['email']}")
            assert answer.status_code == 200, answer.text
        done = await _wait_for(
            client, f"/api/bulks/{bulk}/status", lambda status: status["status"] == "Completed"
        )
        assert done["errorCount"] == 0


def test_the_python_reference_documents_every_public_name() -> None:
    reference = (ROOT / "docs" / "reference" / "python.md").read_text()
    missing = [name for name in bo.__all__ if f"::: bulkops.{name}\n" not in reference]
    assert not missing, f"add '::: bulkops.NAME' to docs/reference/python.md for {missing}"


def test_the_settings_reference_lists_every_setting() -> None:
    hooks = _hooks()
    table = hooks.on_page_markdown(
        "<!-- bulkops:settings -->\n<!-- bulkops:gateway-settings -->", _Page(), None, None
    )
    for name in bo.Settings.model_fields:
        assert f"`BULKOPS_{name.upper()}`" in table
    for name in GatewaySettings.model_fields:
        assert f"`--{name.replace('_', '-')}`" in table or name == "backends"


def test_every_setting_carries_its_description_on_its_field() -> None:
    # The reference and the CLI flags' help read it from there, and nowhere else.
    for model in (bo.Settings, GatewaySettings):
        missing = [n for n, info in model.model_fields.items() if not info.description]
        assert not missing, f"give these fields of {model.__name__} a description: {missing}"


def test_a_setting_without_a_description_fails_the_build(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Bare(bo.Settings):
        undescribed: int = 1

    hooks = _hooks()
    with caplog.at_level("ERROR", logger="mkdocs.hooks.bulkops"):
        hooks._settings_table(Bare, lambda name: name)
    assert [r.getMessage() for r in caplog.records] == [
        "setting Bare.undescribed has no description: give its Field one "
        '(Field(..., description="..."))'
    ]


def test_the_command_reference_lists_every_command_and_option() -> None:
    hooks = _hooks()
    text = hooks.on_page_markdown("<!-- bulkops:cli -->", _Page(), None, None)
    group: Any = typer.main.get_command(cli_app)
    for name, command in group.commands.items():
        assert f"### `bulkops {name}`" in text
        if name in ("serve", "worker", "migrate", "gateway"):
            continue
        for param in command.params:
            if param.param_type_name == "option":
                assert f"`{param.opts[0]}`" in text


class _File:
    src_path = "test.md"


class _Page:
    file = _File()
