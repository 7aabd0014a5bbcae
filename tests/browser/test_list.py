"""The operations list: newest first, status as text, filters, paging, auto-refresh."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import Instance

GOOD = "name,email\nann,ann@example.com\n"
WITH_ERROR = "name,email\nann,ann@example.com\nbad,nope\n"


def test_list_filters_pages_and_refreshes(page: Page, instance: Instance, creator: str) -> None:
    first = instance.submit("gated-import", GOOD, {"requestedBy": "me"}, created_by=creator)
    second = instance.submit(
        "gated-import", WITH_ERROR, {"requestedBy": "me"}, created_by=creator, file_name="two.csv"
    )
    for operation_id in (first, second):
        instance.wait_terminal(operation_id)

    page.goto("/dashboard")
    page.get_by_label("Created by").fill(creator)
    page.get_by_label("Created by").press("Enter")
    table = page.get_by_role("region", name="Operations")
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(2)
    # Newest first, with the status as text, the counts and the file name.
    expect(rows.nth(0)).to_contain_text(second[:8])
    expect(rows.nth(0)).to_contain_text("Completed with errors")
    expect(rows.nth(0)).to_contain_text("two.csv")
    expect(rows.nth(0).get_by_role("progressbar")).to_have_attribute("aria-valuenow", "100")
    expect(rows.nth(1)).to_contain_text(first[:8])
    expect(rows.nth(1).locator(".status")).to_have_text("Completed")
    assert f"createdBy={creator}" in page.url  # a filtered view is a link

    page.get_by_label("Status").select_option("CompletedWithErrors")
    expect(rows).to_have_count(1)
    expect(rows.nth(0)).to_contain_text(second[:8])
    page.get_by_label("Status").select_option("")

    page.get_by_label("Operation", exact=True).select_option("approval")
    expect(page.get_by_text("No operations match these filters.")).to_be_visible()
    page.get_by_label("Operation", exact=True).select_option("gated-import")
    expect(rows).to_have_count(2)

    # Auto-refresh: a new operation appears without reloading the page.
    third = instance.submit("gated-import", GOOD, {"requestedBy": "me"}, created_by=creator)
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text(third[:8])

    page.goto(f"/dashboard?createdBy={creator}&pageSize=2")
    expect(page.get_by_text("Page 1 of 2 (3 operations)")).to_be_visible()
    page.get_by_role("button", name="Next page of operations").click()
    expect(rows).to_have_count(1)
    expect(rows.nth(0)).to_contain_text(first[:8])
    expect(page.get_by_role("button", name="Next page of operations")).to_be_disabled()


def test_dates_filter_and_keyboard_opens_an_operation(
    page: Page, instance: Instance, creator: str
) -> None:
    operation_id = instance.submit("gated-import", GOOD, {"requestedBy": "me"}, created_by=creator)
    page.goto(f"/dashboard?createdBy={creator}")
    rows = page.get_by_role("region", name="Operations").locator("tbody tr")
    expect(rows).to_have_count(1)
    page.get_by_label("Created to").fill("2001-01-01")
    expect(page.get_by_text("No operations match these filters.")).to_be_visible()
    page.get_by_role("button", name="Clear filters").click()
    expect(page.get_by_label("Created by")).to_have_value("")  # the cleared form is shown
    page.get_by_label("Created by").fill(creator)
    page.get_by_label("Created by").press("Enter")
    page.get_by_label("Created from").fill("2001-01-01")
    expect(rows).to_have_count(1)

    link = page.get_by_role("link", name=f"Operation gated-import {operation_id}")
    link.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{instance.url}/dashboard/bulks/{operation_id}")
    heading = page.get_by_role("heading", level=1)
    expect(heading).to_have_text("gated-import")
    expect(heading).to_be_focused()  # focus moves to the new page
    page.go_back()
    expect(rows).to_have_count(1)
