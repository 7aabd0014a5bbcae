"""Two tenants on one service: the page says who you are and which tenant you see, shows the
tenant of each operation, and shows nothing of the other tenant."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import Console, Instance, open_page, start_instance

ACME, GLOBEX = "acme-secret-token", "globex-secret-token"
TOKENS = {
    ACME: {"role": "operate", "name": "alice", "tenant": "acme"},
    GLOBEX: {"role": "operate", "name": "bob", "tenant": "globex"},
}
PEOPLE = "name,email\nann,ann@example.com\n"


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    tmp = tmp_path_factory.mktemp("tenants")
    process, url = start_instance(tmp, auth_tokens=json.dumps(TOKENS))
    try:
        yield Instance(url=url, tmp=tmp, token=ACME)
    finally:
        process.stop()


@pytest.fixture
def tenant_page(browser: Browser, console: Console, tenants: Instance) -> Iterator[Page]:
    console.expect(401, "/api/")  # the answers that make the page ask for a token
    console.expect(404, "/api/bulks/")  # the other tenant's operation is not found
    opened = open_page(browser, console, tenants.url)
    try:
        yield opened
    finally:
        opened.context.close()
    assert not console.problems, "\n".join(console.problems)


def test_the_page_shows_the_callers_tenant_and_only_its_operations(
    tenant_page: Page, tenants: Instance
) -> None:
    page = tenant_page
    mine = tenants.submit("import-users", PEOPLE, {"requestedBy": "me"}, created_by="x")
    tenants.token = GLOBEX
    theirs = tenants.submit("import-users", PEOPLE, {"requestedBy": "me"}, created_by="x")
    tenants.token = ACME
    tenants.wait_terminal(mine)

    page.goto("/dashboard")
    page.get_by_label("Access token", exact=True).fill(ACME)
    page.get_by_role("button", name="Use token").click()
    caller = page.get_by_label("Signed in")
    expect(caller).to_contain_text("Signed in as alice")
    expect(caller).to_contain_text("Tenant acme")
    table = page.get_by_role("region", name="Operations")
    expect(table.get_by_role("columnheader", name="Tenant")).to_be_visible()
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(mine[:8])
    expect(rows.first.locator('td[data-label="Tenant"]')).to_have_text("acme")
    expect(page.get_by_text(theirs[:8])).to_have_count(0)

    page.goto(f"/dashboard/bulks/{mine}")
    expect(page.get_by_role("heading", level=1)).to_have_text("import-users")
    expect(page.get_by_text("Tenant", exact=True)).to_be_visible()
    expect(page.locator("dd", has_text="acme").first).to_be_visible()

    page.goto(f"/dashboard/bulks/{theirs}")  # a deep link to the other tenant's operation
    expect(page.get_by_text("not found").first).to_be_visible()
    expect(page.get_by_text("globex")).to_have_count(0)
