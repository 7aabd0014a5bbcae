"""Getting the data right in the dashboard: a dry run from the create page, a failed row
fixed in place (the server's messages at the field), retry of the fixed rows, and "Run for
real" on a finished dry run."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.conftest import PHONE, Console, Instance
from tests.browser.test_layout import overflow, unnamed_controls

PEOPLE = "name,email\nann,ann@example.com\nbob,bob-at-example.com\ncid,cid@example.com\n"


def test_dry_run_fix_a_row_and_run_for_real(
    page: Page, instance: Instance, console: Console, creator: str, tmp_path: Path
) -> None:
    console.expect(422, "/rows/2")
    people = tmp_path / "people.csv"
    people.write_text(PEOPLE)
    page.goto("/dashboard/new?operation=gated-import")
    page.get_by_label("requestedBy", exact=True).fill(creator)
    page.get_by_label("Created by").fill(creator)
    page.get_by_label("File", exact=True).set_input_files(str(people))
    page.get_by_role("checkbox", name="Dry run").check()
    page.get_by_role("button", name="Create dry run").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("gated-import")
    expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text(
        "Status: Completed with errors"
    )
    expect(page.get_by_text("Every row is validated; nothing is processed.")).to_be_visible()
    (dry,) = instance.get("/api/bulks", createdBy=creator)["items"]
    assert dry["dryRun"] is True and dry["processedRows"] == 3

    # Fix row 2 in place: an invalid email first, shown at its field; then a good one.
    page.get_by_role("button", name="Fix row 2").click()
    editor = page.get_by_role("form", name="Fix row 2")
    email = editor.get_by_label("email", exact=True)
    expect(email).to_have_value("bob-at-example.com")
    email.fill("still-no-at")
    editor.get_by_role("button", name="Save row 2").click()
    expect(editor.get_by_role("alert")).to_contain_text("Row 2 was not saved")
    expect(email).to_have_attribute("aria-invalid", "true")
    expect(editor.locator(".field-error")).to_contain_text("Invalid email address 'still-no-at'")
    assert instance.get(f"/api/bulks/{dry['id']}/errors")["items"][0]["rowData"]["email"] == (
        "bob-at-example.com"
    )  # nothing changed

    email.fill("bob@example.com")
    editor.get_by_role("button", name="Save row 2").click()
    expect(page.get_by_role("status").filter(has_text="Row 2 saved")).to_be_visible()
    failed = page.get_by_role("region", name="Failed rows table")
    expect(failed.get_by_role("row").filter(has_text="bob")).to_contain_text("fixed")
    (row,) = instance.get(f"/api/bulks/{dry['id']}/errors")["items"]
    assert (row["fixed"], row["rowData"]["email"]) == (True, "bob@example.com")

    # Run for real: a new operation reads the dry run's file with the fixed row.
    page.get_by_role("button", name="Run for real").click()
    expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text("Status: Completed")
    expect(page.locator(".facts").first.locator(".term", has_text="Read from")).to_contain_text(
        dry["id"]
    )
    expect(page.get_by_text("Every row is validated; nothing is processed.")).to_have_count(0)
    listed = instance.get("/api/bulks", operationName="gated-import", pageSize=1000)["items"]
    runs = [item for item in listed if item.get("sourceOperationId") == dry["id"]]
    assert len(runs) == 1
    assert (runs[0]["successfulRows"], runs[0]["errorCount"]) == (3, 0)


def test_retry_fixed_rows(page: Page, instance: Instance, creator: str) -> None:
    rows = PEOPLE + "dan,dan-at-example.com\n"
    operation_id = instance.submit("gated-import", rows, {"requestedBy": "me"}, created_by=creator)
    instance.wait_terminal(operation_id)
    page.goto(f"/dashboard/bulks/{operation_id}")
    failed = page.get_by_role("region", name="Failed rows table")
    expect(failed.get_by_role("row")).to_have_count(3)  # header, bob, dan
    retry_fixed = page.get_by_role("button", name="Retry fixed rows")
    expect(retry_fixed).to_be_disabled()  # nothing fixed yet
    expect(page.get_by_role("checkbox", name="Select row 2")).to_be_disabled()

    page.get_by_role("button", name="Fix row 4").click()
    editor = page.get_by_role("form", name="Fix row 4")
    editor.get_by_label("email", exact=True).fill("dan@example.com")
    editor.get_by_role("button", name="Save row 4").click()
    expect(page.get_by_role("status").filter(has_text="Row 4 saved")).to_be_visible()
    expect(page.get_by_role("checkbox", name="Select row 4")).to_be_enabled()

    retry_fixed.click()
    expect(page.get_by_role("status").filter(has_text="Retry submitted")).to_contain_text(
        "Retry submitted 1 row, skipped 0."
    )
    expect(failed.get_by_role("row")).to_have_count(2)  # header, bob: not fixed
    expect(failed).not_to_contain_text("dan")
    history = page.get_by_role("region", name="Retry history table")
    expect(history).to_contain_text("Invalid email address 'dan-at-example.com'")
    detail = instance.get(f"/api/bulks/{operation_id}")
    assert (detail["errorCount"], detail["successfulRows"], detail["retryCount"]) == (1, 3, 1)


def test_fix_is_offered_only_for_finished_operations(
    page: Page, instance: Instance, creator: str
) -> None:
    gate = instance.scratch("gate")
    rows = "name,email\nbad,no\nwait,wait@example.com\n"
    operation_id = instance.submit(
        "gated-import", rows, {"requestedBy": "me", "gate": str(gate)}, created_by=creator
    )
    page.goto(f"/dashboard/bulks/{operation_id}")
    failed = page.get_by_role("region", name="Failed rows table")
    expect(failed.get_by_role("row")).to_have_count(2)
    expect(page.get_by_role("button", name="Fix row 1")).to_have_count(0)  # still running
    gate.touch()
    expect(page.get_by_role("button", name="Fix row 1")).to_be_visible()


def test_the_row_editor_names_every_control_and_fits_a_phone(
    page: Page, instance: Instance, console: Console, creator: str
) -> None:
    console.expect(422, "/rows/2")
    operation_id = instance.submit(
        "gated-import", PEOPLE, {"requestedBy": "me"}, created_by=creator
    )
    instance.wait_terminal(operation_id)
    page.set_viewport_size(PHONE)
    page.goto(f"/dashboard/bulks/{operation_id}")
    page.get_by_role("button", name="Fix row 2").click()
    editor = page.get_by_role("form", name="Fix row 2")
    editor.get_by_label("name", exact=True).fill("")
    editor.get_by_role("button", name="Save row 2").click()
    expect(editor.get_by_role("alert")).to_contain_text("Row 2 was not saved")
    expect(editor.get_by_label("name", exact=True)).to_have_attribute("aria-invalid", "true")
    assert unnamed_controls(page) == []
    assert overflow(page) == 0
    editor.get_by_role("button", name="Cancel editing").click()
    expect(page.get_by_role("form", name="Fix row 2")).to_have_count(0)
