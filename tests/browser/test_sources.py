"""The create page's saved mappings ("Save this mapping", the picker), its warning before a
duplicate file is submitted, and "From a URL"."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import Console, Instance, open_page, start_instance
from tests.browser.test_create import RECORD_FORMS, created_by, sent_forms
from tests.source_server import SourceServer, source_server


def fill_metadata(page: Page, creator: str) -> None:
    page.get_by_label("requestedBy", exact=True).fill("ann")
    page.get_by_label("batch", exact=True).fill("1")
    page.get_by_label("department", exact=True).fill("Sales")
    page.get_by_label("Created by", exact=True).fill(creator)


def test_a_mapping_is_saved_then_picked(
    page: Page, instance: Instance, creator: str, tmp_path: Path
) -> None:
    upload = tmp_path / "people.csv"
    upload.write_text(f"Full Name;E_Mail\n{creator};{creator}@example.com\n")
    name = f"{creator[:40]} map"

    page.add_init_script(RECORD_FORMS)
    page.goto("/dashboard/new?operation=typed-import")
    fill_metadata(page, creator)
    page.get_by_label("File", exact=True).set_input_files(str(upload))
    page.get_by_label("Map file column Full Name").select_option("name")
    page.get_by_label("Mapping name", exact=True).fill(name)
    page.get_by_role("button", name="Save this mapping").click()
    expect(page.get_by_role("status").filter(has_text="Saved mapping")).to_be_visible()
    saved = instance.get(f"/api/operations/typed-import/mappings/{name}")
    assert saved["columnMap"] == {"Full Name": "name", "E_Mail": "email"}
    expect(page.get_by_label("Saved mapping", exact=True)).to_have_value(name)

    # Another visit: the saved mapping is picked and sent by its name.
    page.goto("/dashboard/new?operation=typed-import")
    fill_metadata(page, creator)
    page.get_by_label("File", exact=True).set_input_files(str(upload))
    page.get_by_label("Saved mapping", exact=True).select_option(name)
    expect(page.get_by_label("Map file column Full Name")).to_have_value("name")
    page.get_by_role("button", name="Create operation").click()
    expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text("Status: Completed")
    [create] = sent_forms(page, "/api/bulks")
    assert create["fields"]["mapping"] == name and "columnMap" not in create["fields"]
    [operation] = created_by(instance, creator)
    assert operation["columnMap"] == {"Full Name": "name", "E_Mail": "email"}


def test_a_duplicate_is_created_only_once_confirmed(
    page: Page, instance: Instance, creator: str, tmp_path: Path
) -> None:
    upload = tmp_path / "people.csv"
    upload.write_text(f"name,email\n{creator},{creator}@example.com\n")
    page.goto("/dashboard/new?operation=typed-import")
    fill_metadata(page, creator)
    page.get_by_label("File", exact=True).set_input_files(str(upload))
    page.get_by_role("button", name="Create operation").click()
    expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text("Status: Completed")
    [first] = created_by(instance, creator)

    page.goto("/dashboard/new?operation=typed-import")
    fill_metadata(page, creator)
    page.get_by_label("File", exact=True).set_input_files(str(upload))
    page.get_by_role("button", name="Create operation").click()
    warning = page.get_by_role("alert").filter(has_text="submitted before")
    expect(warning).to_contain_text(first["id"])
    assert len(created_by(instance, creator)) == 1  # nothing submitted yet
    warning.get_by_role("button", name="Create anyway").click()
    expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text("Status: Completed")
    assert len(created_by(instance, creator)) == 2


@pytest.fixture(scope="module")
def sourced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Instance, SourceServer]]:
    """A service whose allow list names a loopback source server's /files/."""
    with source_server() as server:
        tmp = tmp_path_factory.mktemp("sourced")
        process, url = start_instance(tmp, source_url_allow=f"{server.base}/files/")
        try:
            yield Instance(url=url, tmp=tmp), server
        finally:
            process.stop()


def test_an_operation_is_created_from_a_url(
    browser: Browser,
    console: Console,
    sourced: tuple[Instance, SourceServer],
    creator: str,
) -> None:
    instance, server = sourced
    server.files["/files/people.csv"] = f"name,email\n{creator},{creator}@example.com\n".encode()
    console.expect(400, "/api/bulks/validate")
    console.expect(404, "/notifications")
    page = open_page(browser, console, instance.url)
    try:
        page.add_init_script(RECORD_FORMS)
        page.goto("/dashboard/new?operation=typed-import")
        fill_metadata(page, creator)
        page.get_by_label("From a URL").check()
        page.get_by_label("URL of the file", exact=True).fill("http://10.0.0.1/files/people.csv")
        page.get_by_role("button", name="Validate").click()
        expect(page.get_by_role("alert")).to_contain_text("not allowed")
        assert server.requests == []
        page.get_by_label("URL of the file", exact=True).fill(f"{server.base}/files/people.csv")
        page.get_by_role("button", name="Create operation").click()
        expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text(
            "Status: Completed"
        )
        [create] = sent_forms(page, "/api/bulks")
        assert create["fields"]["sourceUrl"] == f"{server.base}/files/people.csv"
        assert "file" not in create["fields"]
        [operation] = instance.get("/api/bulks", createdBy=creator)["items"]
        assert operation["fileName"] == "people.csv"
    finally:
        page.context.close()
    assert not console.problems, "\n".join(console.problems)
    assert json.dumps(server.requests)  # the source was read
