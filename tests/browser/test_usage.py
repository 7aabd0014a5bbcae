"""The usage page: each tenant's use by day, as GET /api/usage gives it."""

from __future__ import annotations

from datetime import UTC, datetime

from playwright.sync_api import Page, expect

from tests.browser.conftest import Instance

GOOD = "name,email\nann,ann@example.com\nbob,bob@example.com\n"


def test_usage_shows_today_and_is_reached_from_the_navigation(
    page: Page, instance: Instance, creator: str
) -> None:
    operation_id = instance.submit("gated-import", GOOD, {"requestedBy": "me"}, created_by=creator)
    instance.wait_terminal(operation_id)
    today = datetime.now(UTC).date().isoformat()
    expected = next(item for item in instance.get("/api/usage")["items"] if item["day"] == today)

    page.goto("/dashboard")
    page.get_by_role("navigation", name="Dashboard").get_by_role("link", name="Usage").click()
    expect(page).to_have_url(f"{instance.url}/dashboard/usage")
    expect(page.get_by_role("heading", level=1)).to_have_text("Usage")
    table = page.get_by_role("region", name="Usage by tenant and day")
    row = table.locator("tbody tr", has_text=today)
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(1)).to_have_text("none")  # created without a tenant
    expect(row.locator("td").nth(2)).not_to_have_text("")
    assert expected["operationsCreated"] >= 1
