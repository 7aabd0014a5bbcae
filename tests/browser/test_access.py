"""A secured service (BULKOPS_AUTH_TOKENS): the page asks for a token, keeps it in the tab's
session only, sends it as a bearer token, and turns read-only after a 403."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import Console, Instance, open_page, start_instance

OPERATE, READ = "operate-secret-token", "read-secret-token"
TOKENS = {OPERATE: {"role": "operate", "name": "ops-team"}, READ: "read"}
PEOPLE = "name,email\nann,ann@example.com\nbob,bob@example.com\n"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    tmp = tmp_path_factory.mktemp("secured")
    process, url = start_instance(tmp, auth_tokens=json.dumps(TOKENS))
    try:
        yield Instance(url=url, tmp=tmp, token=OPERATE)
    finally:
        process.stop()


@pytest.fixture
def secured_page(browser: Browser, console: Console, secured: Instance) -> Iterator[Page]:
    if not secured.serves("/api/bulks/{id}/notifications"):
        console.expect(404, "/notifications")
    console.expect(401, "/api/")  # the answers that make the page ask for a token
    opened = open_page(browser, console, secured.url)
    try:
        yield opened
    finally:
        opened.context.close()
    assert not console.problems, "\n".join(console.problems)


def use_token(page: Page, token: str) -> None:
    page.get_by_label("Access token", exact=True).fill(token)
    page.get_by_role("button", name="Use token").click()


def test_token_entry_then_read_only_after_a_403(
    secured_page: Page, secured: Instance, console: Console
) -> None:
    page = secured_page
    fail_list = secured.scratch("fail-list")
    fail_list.write_text("bob\n")
    metadata = {"requestedBy": "me", "failList": str(fail_list)}
    operation_id = secured.submit("gated-import", PEOPLE, metadata, created_by="x")
    secured.wait_terminal(operation_id)

    page.goto("/dashboard")
    expect(page.get_by_text("This service needs an access token.")).to_be_visible()
    use_token(page, "wrong-token")
    expect(page.get_by_text("The service refused this access token.")).to_be_visible()

    use_token(page, READ)
    rows = page.get_by_role("region", name="Operations").locator("tbody tr")
    expect(rows.filter(has_text=operation_id[:8])).to_have_count(1)
    assert page.evaluate("sessionStorage.getItem('bulkops.token')") == READ
    assert page.evaluate("localStorage.length") == 0
    assert page.evaluate("document.cookie") == ""

    console.expect(403, f"/api/bulks/{operation_id}/retry")
    page.goto(f"/dashboard/bulks/{operation_id}")  # a reload keeps the tab's token
    expect(page.get_by_role("heading", level=1)).to_have_text("gated-import")
    page.get_by_role("button", name="Retry failed rows").click()
    expect(page.get_by_text("Read-only access:")).to_be_visible()
    expect(page.get_by_text("Using an access token (read-only).")).to_be_visible()
    expect(page.get_by_role("button", name="Retry failed rows")).to_be_disabled()
    assert secured.get(f"/api/bulks/{operation_id}")["retryCount"] == 0

    with page.expect_download() as export:  # downloads carry the token too
        page.get_by_role("button", name="Download export").click()
    assert export.value.suggested_filename == f"operation-{operation_id}-report.csv"

    page.get_by_role("button", name="Forget access token").click()
    expect(page.get_by_text("This service needs an access token.")).to_be_visible()
    use_token(page, OPERATE)
    expect(page.get_by_text("Read-only access:")).to_have_count(0)
    fail_list.write_text("")
    page.get_by_role("button", name="Retry failed rows").click()
    expect(page.get_by_role("status").filter(has_text="Retry submitted")).to_contain_text(
        "Retry submitted 1 row"
    )


def test_creating_with_a_token_is_attributed_to_its_principal(
    secured_page: Page, secured: Instance, tmp_path: Path
) -> None:
    page = secured_page
    upload = tmp_path / "people.csv"
    upload.write_text(PEOPLE + "cid,cid@example.com\n")  # not the file the other test sent
    page.goto("/dashboard/new?operation=gated-import")
    use_token(page, OPERATE)
    page.get_by_label("requestedBy", exact=True).fill("me")
    page.get_by_label("Created by", exact=True).fill("someone-else")  # ignored when signed in
    page.get_by_label("File", exact=True).set_input_files(str(upload))
    page.get_by_role("button", name="Create operation").click()
    expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text("Status: Completed")
    facts = page.locator(".facts").first
    expect(facts.locator(".term", has_text="Created by")).to_contain_text("ops-team")
