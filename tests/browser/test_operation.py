"""The operation page: live progress, retry, signals, cancel, downloads."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.conftest import Instance

PEOPLE = "name,email\nann,ann@example.com\nbob,bob@example.com\ncid,cid@example.com\nbad,nope\n"


def status_line(page: Page) -> object:
    return page.get_by_role("status").filter(has_text="Status:")


def test_progress_is_live_until_a_final_status(
    page: Page, instance: Instance, creator: str
) -> None:
    gate = instance.scratch("gate")
    rows = "name,email\nbad,no\np1,p1@example.com\np2,p2@example.com\np3,p3@example.com\n"
    operation_id = instance.submit(
        "gated-import", rows, {"requestedBy": "me", "gate": str(gate)}, created_by=creator
    )
    page.goto(f"/dashboard/bulks/{operation_id}")
    expect(page.get_by_role("heading", level=1)).to_have_text("gated-import")
    expect(status_line(page)).to_have_text("Status: Running")
    bar = page.get_by_role("progressbar", name="Progress")

    gate.with_name(f"{gate.name}.p1").touch()  # p1 finishes (and row 1 failed validation)
    expect(bar).to_have_attribute("aria-valuetext", "50% (2 of 4 rows)")
    expect(status_line(page)).to_have_text("Status: Running")

    gate.touch()
    expect(status_line(page)).to_have_text("Status: Completed with errors")
    expect(bar).to_have_attribute("aria-valuenow", "100")
    facts = page.locator(".facts").first
    expect(facts.locator(".term", has_text="Succeeded")).to_contain_text("3")
    expect(facts.locator(".term", has_text="Failed")).to_contain_text("1")
    events = page.get_by_role("region", name="Events of this operation")
    expect(events.get_by_role("row").filter(has_text="Completed")).not_to_have_count(0)
    expect(page.get_by_role("button", name="Cancel operation")).to_have_count(0)


def test_retry_selected_and_all_failed_rows(page: Page, instance: Instance, creator: str) -> None:
    fail_list = instance.scratch("fail-list")
    fail_list.write_text("bob\ncid\n")
    metadata = {"requestedBy": "me", "failList": str(fail_list)}
    operation_id = instance.submit("gated-import", PEOPLE, metadata, created_by=creator)
    instance.wait_terminal(operation_id)
    page.goto(f"/dashboard/bulks/{operation_id}")
    failed = page.get_by_role("region", name="Failed rows table")
    expect(failed.get_by_role("row")).to_have_count(4)  # header, bob, cid, bad
    expect(page.get_by_role("checkbox", name="Select row 4")).to_be_disabled()  # validation

    fail_list.write_text("cid\n")  # bob would now succeed
    page.get_by_role("checkbox", name="Select row 2").check()
    page.get_by_role("button", name="Retry selected rows (1)").click()
    expect(page.get_by_role("status").filter(has_text="Retry submitted")).to_contain_text(
        "Retry submitted 1 row, skipped 0."
    )
    expect(failed.get_by_role("row")).to_have_count(3)  # header, cid, bad
    expect(failed).not_to_contain_text("bob@example.com")
    history = page.get_by_role("region", name="Retry history table")
    expect(history.get_by_role("row")).to_have_count(2)
    expect(history).to_contain_text("bob is on the fail list")

    fail_list.write_text("")
    page.get_by_role("button", name="Retry failed rows").click()
    expect(failed.get_by_role("row")).to_have_count(2)  # header, bad: validation is final
    expect(page.get_by_text("Retry is not possible now:")).to_be_visible()
    expect(page.get_by_role("button", name="Retry failed rows")).to_be_disabled()
    detail = instance.get(f"/api/bulks/{operation_id}")
    assert (detail["status"], detail["errorCount"], detail["retryCount"]) == (
        "CompletedWithErrors",
        1,
        2,
    )


def test_signal_buttons_complete_and_fail_waiting_rows(
    page: Page, instance: Instance, creator: str
) -> None:
    operation_id = instance.submit(
        "approval", "name\nann\nbob\nann\n", {"requestedBy": "me"}, created_by=creator
    )
    page.goto(f"/dashboard/bulks/{operation_id}")
    waiting = page.get_by_role("region", name="Waiting for a signal")
    expect(waiting.get_by_role("listitem").filter(has_text="ann")).to_contain_text(
        "rows 1, 3 waiting at Approve"
    )

    page.get_by_role("button", name="Signal success for ann").click()
    expect(waiting.get_by_role("status")).to_have_text("Row 1 completed at Approve.")
    expect(waiting.get_by_role("listitem").filter(has_text="ann")).to_contain_text("row 3 waiting")

    expect(page.get_by_role("button", name="Signal failure for bob")).to_be_disabled()
    page.get_by_role("textbox", name="Failure message for bob").fill("not approved")
    page.get_by_role("button", name="Signal failure for bob").click()
    expect(waiting.get_by_role("status")).to_have_text("Row 2 failed at Approve.")

    page.get_by_role("button", name="Signal success for ann").click()
    expect(status_line(page)).to_have_text("Status: Completed with errors")
    expect(waiting.get_by_text("No row is waiting for a signal.")).to_be_visible()
    failed = page.get_by_role("region", name="Failed rows table")
    expect(failed.get_by_role("row").filter(has_text="not approved")).to_contain_text(
        "Signal failure"
    )
    rows = page.get_by_role("region", name="Rows and steps table")
    expect(rows.get_by_role("row").filter(has_text="Record: Completed")).to_have_count(2)


def test_cancel_after_confirming(page: Page, instance: Instance, creator: str) -> None:
    gate = instance.scratch("gate")  # never opened: the rows wait until cancelled
    operation_id = instance.submit(
        "gated-import", PEOPLE, {"requestedBy": "me", "gate": str(gate)}, created_by=creator
    )
    try:
        page.goto(f"/dashboard/bulks/{operation_id}")
        expect(status_line(page)).to_have_text("Status: Running")
        page.get_by_role("button", name="Cancel operation").click()
        confirm = page.get_by_role("button", name="Yes, cancel the operation")
        expect(confirm).to_be_focused()
        confirm.press("Enter")
        expect(status_line(page)).to_have_text("Status: Cancelled")
        expect(page.get_by_role("button", name="Cancel operation")).to_have_count(0)
        assert instance.get(f"/api/bulks/{operation_id}/status")["status"] == "Cancelled"
    finally:
        gate.touch()  # frees the worker slot whatever happened


def test_export_and_original_file_downloads(
    page: Page, instance: Instance, creator: str, tmp_path: Path
) -> None:
    operation_id = instance.submit(
        "gated-import", PEOPLE, {"requestedBy": "me"}, created_by=creator, file_name="people.csv"
    )
    instance.wait_terminal(operation_id)
    page.goto(f"/dashboard/bulks/{operation_id}")

    with page.expect_download() as original:
        page.get_by_role("button", name="Download original file people.csv").click()
    assert original.value.suggested_filename == "people.csv"
    assert Path(original.value.path()).read_text() == PEOPLE

    page.get_by_label("Export mode").select_option("data")
    page.get_by_label("Export format").select_option("jsonl")
    page.get_by_role("checkbox", name="Failed rows only").check()
    with page.expect_download() as export:
        page.get_by_role("button", name="Download export").click()
    assert export.value.suggested_filename == f"operation-{operation_id}-data.jsonl"
    lines = Path(export.value.path()).read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["name"], r["_errorType"]) for r in records] == [("bad", "Validation")]
    expect(page.get_by_role("status").filter(has_text="Saved operation-")).to_have_text(
        f"Saved operation-{operation_id}-data.jsonl"
    )


def test_unknown_operation_says_so(page: Page, console: Callable[..., object]) -> None:
    console.expect(404, "/api/bulks/")  # type: ignore[attr-defined]
    page.goto("/dashboard/bulks/00000000-0000-0000-0000-000000000000")
    expect(page.get_by_role("heading", level=1)).to_have_text("Operation not found")
    expect(page.get_by_role("alert")).to_contain_text("not found")
