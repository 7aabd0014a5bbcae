"""Bulk actions from the operations list: select operations (or every one matching the
filter), see the preview's count, confirm, and watch the action end."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import Instance

ROWS = "name,email\nann,ann@example.com\nbob,bob@example.com\n"


def test_retry_the_selected_operations_after_the_preview(
    page: Page, instance: Instance, creator: str
) -> None:
    fail_list = instance.scratch("fail-list")
    fail_list.write_text("bob\n")
    metadata = {"requestedBy": "me", "failList": str(fail_list)}
    failing = [
        instance.submit("gated-import", ROWS, metadata, created_by=creator) for _ in range(2)
    ]
    fine = instance.submit("gated-import", ROWS, {"requestedBy": "me"}, created_by=creator)
    for operation_id in (*failing, fine):
        instance.wait_terminal(operation_id)
    fail_list.write_text("")  # the cause is gone: a retry succeeds

    page.goto(f"/dashboard?createdBy={creator}")
    rows = page.get_by_role("region", name="Operations").locator("tbody tr")
    expect(rows).to_have_count(3)
    bar = page.get_by_role("group", name="Bulk actions")
    expect(bar.get_by_role("button", name="Retry…")).to_be_disabled()

    # Every operation matching the filter: the preview counts all three; not now.
    bar.get_by_label("All operations matching the filter").check()
    bar.get_by_role("button", name="Retry…").click()
    confirm = page.get_by_role("group", name="Confirm bulk action")
    expect(confirm).to_contain_text("Retry 3 operations?")
    confirm.get_by_role("button", name="Not now").click()
    expect(confirm).to_have_count(0)
    bar.get_by_label("All operations matching the filter").uncheck()

    for operation_id in failing:
        page.get_by_label(f"Select operation {operation_id[:8]}").check()
    expect(bar).to_contain_text("2 selected")
    bar.get_by_role("button", name="Retry…").click()
    expect(confirm).to_contain_text("Retry 2 operations?")
    confirm.get_by_role("button", name="Yes, retry 2 operations").click()
    progress = page.get_by_role("status", name="Bulk action progress")
    expect(progress).to_contain_text(
        "operations: Completed, 2 done, 0 skipped, 0 failed", timeout=20_000
    )
    for operation_id in failing:
        instance.wait_status(operation_id, {"Completed"})
    assert instance.get(f"/api/bulks/{fine}")["retryCount"] == 0
