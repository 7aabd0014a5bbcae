"""The live event feed: the first poll adopts the cursor, then new events appear."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import Instance

GOOD = "name,email\nann,ann@example.com\n"


def test_feed_shows_only_events_after_opening(page: Page, instance: Instance, creator: str) -> None:
    before = instance.submit("gated-import", GOOD, {"requestedBy": "me"}, created_by=creator)
    instance.wait_terminal(before)

    page.goto("/dashboard/events")
    expect(page.get_by_role("status")).to_have_text("Waiting for new events…")
    after = instance.submit("gated-import", GOOD, {"requestedBy": "me"}, created_by=creator)
    table = page.get_by_role("region", name="Events")
    new = table.locator("tbody tr", has_text=after[:8])
    expect(new.filter(has_text="Completed")).to_have_count(1)
    expect(new.filter(has_text="Created")).to_have_count(1)
    expect(table.locator("tbody tr", has_text=before[:8])).to_have_count(0)
    # Newest first.
    expect(table.locator("tbody tr").first).to_contain_text("Completed")

    page.get_by_role("button", name="Show the 100 latest events").click()
    expect(table.locator("tbody tr", has_text=before[:8])).not_to_have_count(0)

    new.filter(has_text="Completed").get_by_role("link", name="gated-import").click()
    expect(page).to_have_url(f"{instance.url}/dashboard/bulks/{after}")


def test_feeds_show_who_caused_each_event(page: Page, instance: Instance, creator: str) -> None:
    operation_id = instance.submit("gated-import", GOOD, {"requestedBy": "me"}, created_by=creator)
    instance.wait_terminal(operation_id)
    page.goto(f"/dashboard/bulks/{operation_id}")
    table = page.get_by_role("region", name="Events of this operation")
    created = table.locator("tbody tr", has_text="Created")
    expect(created.locator("td[data-label=Actor]")).to_have_text(creator)
    finished = table.locator("tbody tr", has_text="rows succeeded")
    expect(finished.locator("td[data-label=Actor]")).to_have_text("system")
