"""Undo in the dashboard: the "Undo" button on a finished operation whose operation defines
one, the preview's counts in the confirmation, and the links between the two operations."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import Instance

USERS = "name,email\nann,ann@example.com\nbob,bob@blocked.example\ncid,cid@example.com\n"


def test_undo_a_finished_import_from_its_page(page: Page, instance: Instance, creator: str) -> None:
    original = instance.submit("import-users", USERS, {"requestedBy": creator}, created_by=creator)
    instance.wait_terminal(original)
    page.goto(f"/dashboard/bulks/{original}")
    expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text(
        "Status: Completed with errors"
    )
    page.get_by_role("button", name="Undo", exact=True).click()
    confirm = page.get_by_role("group", name="Confirm undo")
    expect(confirm).to_contain_text("Undo 2 rows (2 steps)?")
    confirm.get_by_role("button", name="Yes, undo").click()

    expect(page.get_by_test_id("undo-of")).to_contain_text(original)
    undo_id = instance.get(f"/api/bulks/{original}")["undoneBy"]
    expect(page).to_have_url(f"{instance.url}/dashboard/bulks/{undo_id}")
    instance.wait_terminal(undo_id)
    expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text("Status: Completed")
    assert instance.get(f"/api/bulks/{undo_id}")["successfulRows"] == 2
    # An undo has no Undo of its own; the original links to its undo and offers none.
    expect(page.get_by_role("button", name="Undo", exact=True)).to_have_count(0)
    page.get_by_test_id("undo-of").get_by_role("link").click()
    expect(page.get_by_test_id("undone-by")).to_contain_text(undo_id)
    expect(page.get_by_role("button", name="Undo", exact=True)).to_have_count(0)


def test_no_undo_for_an_operation_without_one(page: Page, instance: Instance, creator: str) -> None:
    operation = instance.submit(
        "charge-customers", "customer,amount_cents\nann,100\n", {}, created_by=creator
    )
    instance.wait_terminal(operation)
    page.goto(f"/dashboard/bulks/{operation}")
    expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text("Status: Completed")
    expect(page.get_by_role("button", name="Undo", exact=True)).to_have_count(0)
