"""New operation: the generated metadata form, validation before submit, column mapping,
notifications, the template download, and landing on the new operation's page."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from openpyxl import Workbook
from playwright.sync_api import Page, expect

from tests.browser.conftest import Console, Instance


def created_by(instance: Instance, creator: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = instance.get("/api/bulks", createdBy=creator)["items"]
    return items


# Records the text fields of every multipart request the page sends (Chromium does not
# hand multipart bodies with files to Playwright).
RECORD_FORMS = """
const send = window.fetch;
window.sentForms = [];
window.fetch = (input, init = {}) => {
  if (init.body instanceof FormData) {
    const fields = {};
    for (const [name, value] of init.body.entries()) {
      fields[name] = typeof value === "string" ? value : `file:${value.name}`;
    }
    window.sentForms.push({ url: String(input), headers: init.headers || {}, fields });
  }
  return send(input, init);
};
"""


def sent_forms(page: Page, path: str) -> list[dict[str, Any]]:
    """The forms the page posted to URLs ending with ``path``, oldest first."""
    forms: list[dict[str, Any]] = page.evaluate("window.sentForms")
    return [form for form in forms if form["url"].split("?")[0].endswith(path)]


def test_metadata_form_validates_before_creating(
    page: Page, instance: Instance, console: Console, creator: str, tmp_path: Path
) -> None:
    console.expect(422, "/api/bulks/validate")
    bad = tmp_path / "contacts.csv"
    bad.write_text("name,email\nann,ann@example.com\nbob,bob-at-example\n")
    good = tmp_path / "fixed.csv"
    good.write_text("name,email\nann,ann@example.com\nbob,bob@example.com\n")

    page.add_init_script(RECORD_FORMS)
    page.goto("/dashboard/new?operation=typed-import")
    expect(page.get_by_label("Operation", exact=True)).to_have_value("typed-import")
    expect(page.get_by_text("Takes metadata of every field type")).to_be_visible()
    # One input per metadata field, named by the field, typed by the descriptor.
    expect(page.get_by_label("batch", exact=True)).to_have_attribute("type", "number")
    expect(page.get_by_label("startAt", exact=True)).to_have_attribute("type", "datetime-local")
    expect(page.get_by_label("urgent", exact=True)).to_have_role("combobox")
    expect(page.get_by_label("requestedBy", exact=True)).to_have_attribute("aria-required", "true")
    expect(page.locator("#meta-department-hint")).to_have_text(
        "string, required, may be empty (null)"
    )

    page.get_by_label("requestedBy", exact=True).fill("ann")
    page.get_by_label("File", exact=True).set_input_files(str(bad))
    expect(page.get_by_role("status").filter(has_text="Columns found")).to_have_text(
        "Columns found: name, email."
    )
    page.get_by_role("button", name="Create operation").click()
    problems = page.get_by_role("alert").filter(has_text="Validation failed")
    expect(problems).to_contain_text("Metadata errors")
    expect(problems.get_by_role("listitem")).to_contain_text(["batch"])

    page.get_by_label("batch", exact=True).fill("7")
    page.get_by_role("button", name="Create operation").click()
    expect(problems).to_contain_text("File errors")
    expect(problems.get_by_role("listitem")).to_contain_text(["bob-at-example"])
    expect(problems).not_to_contain_text("Metadata errors")
    assert created_by(instance, creator) == []  # nothing was submitted
    checked = json.loads(sent_forms(page, "/api/bulks/validate")[-1]["fields"]["metadata"])
    assert checked == {"requestedBy": "ann", "batch": 7, "department": None}  # empty: null

    page.get_by_label("department", exact=True).fill("Sales")

    page.get_by_label("ratio", exact=True).fill("0.5")
    page.get_by_label("urgent", exact=True).select_option("true")
    page.get_by_label("startAt", exact=True).fill("2026-01-02T03:04:05")
    page.get_by_label("Created by", exact=True).fill(creator)
    page.get_by_label("File", exact=True).set_input_files(str(good))
    page.get_by_role("button", name="Validate").click()
    expect(page.get_by_role("status").filter(has_text="Validation passed")).to_be_visible()

    page.get_by_role("button", name="Add webhook").click()
    page.get_by_label("Webhook URL 1").fill("https://hooks.example.com/bulkops")
    webhook = page.get_by_role("group", name="Webhook 1")
    webhook.get_by_role("checkbox", name="On completion", exact=True).check()
    page.get_by_role("button", name="Create operation").click()

    expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text("Status: Completed")
    [create] = sent_forms(page, "/api/bulks")
    assert json.loads(create["fields"]["notifications"]) == {
        "recipients": [
            {
                "channel": "webhook",
                "target": "https://hooks.example.com/bulkops",
                "triggers": ["OnCompletion", "OnFailure"],
            }
        ]
    }
    assert create["fields"]["file"] == "file:fixed.csv"
    assert create["headers"]["Idempotency-Key"]
    [operation] = created_by(instance, creator)
    assert page.url.endswith(f"/dashboard/bulks/{operation['id']}")
    metadata = operation["metadata"]
    assert metadata["requestedBy"] == "ann"
    assert metadata["batch"] == 7
    assert metadata["ratio"] == 0.5
    assert metadata["urgent"] is True
    assert metadata["department"] == "Sales"
    assert metadata["startAt"].startswith("2026-01-02T03:04:05")


def test_column_mapping_step_renames_file_columns(
    page: Page, instance: Instance, creator: str, tmp_path: Path
) -> None:
    upload = tmp_path / "people.csv"
    upload.write_text("Full Name;E_Mail;Notes\nAnn;ann@example.com;x\nBob;bob@example.com;y\n")

    page.add_init_script(RECORD_FORMS)
    page.goto("/dashboard/new?operation=typed-import")
    page.get_by_label("requestedBy", exact=True).fill("ann")
    page.get_by_label("batch", exact=True).fill("1")
    page.get_by_label("department", exact=True).fill("Sales")
    page.get_by_label("Created by", exact=True).fill(creator)
    page.get_by_label("File", exact=True).set_input_files(str(upload))
    mapping = page.get_by_role("region", name="Column mapping")
    expect(page.get_by_label("Map file column E_Mail")).to_have_value("email")  # suggested
    expect(page.get_by_label("Map file column Full Name")).to_have_value("")
    expect(page.get_by_label("Map file column Notes")).to_have_value("")
    expect(page.get_by_text("Required columns not mapped: name.")).to_be_visible()
    expect(mapping.get_by_role("row")).to_have_count(4)

    page.get_by_label("Map file column Full Name").select_option("name")
    expect(page.get_by_text("Required columns not mapped")).to_have_count(0)
    page.get_by_role("button", name="Create operation").click()
    expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text("Status: Completed")
    for form in sent_forms(page, "/api/bulks/validate") + sent_forms(page, "/api/bulks"):
        assert json.loads(form["fields"]["columnMap"]) == {"Full Name": "name", "E_Mail": "email"}
    [operation] = created_by(instance, creator)
    assert (operation["totalRows"], operation["errorCount"]) == (2, 0)


def test_template_download(page: Page) -> None:
    page.goto("/dashboard/new?operation=gated-import")
    with page.expect_download() as template:
        page.get_by_role("button", name="Download template for gated-import").click()
    assert template.value.suggested_filename == "gated-import-template.csv"
    assert Path(template.value.path()).read_text().splitlines()[0] == "name,email,age"


def test_an_excel_upload_names_its_sheet_and_completes(
    page: Page, instance: Instance, console: Console, creator: str, tmp_path: Path
) -> None:
    """An .xlsx file is accepted; its columns are left to the server's check (the page
    does not read workbooks), and the "Sheet" field picks the worksheet read."""
    console.expect(400, "/api/bulks/validate")
    book = Workbook()
    book.active.title = "Notes"
    book.active.append(["not", "the rows"])
    people = book.create_sheet("People")
    people.append(["name", "email", "age"])
    people.append(["Ann", "ann@example.com", 30])
    people.append(["Bob", "bob@example.com", 41])
    upload = tmp_path / "people.xlsx"
    book.save(upload)

    page.add_init_script(RECORD_FORMS)
    page.goto("/dashboard/new?operation=gated-import")
    file_input = page.get_by_label("File", exact=True)
    accepted = (file_input.get_attribute("accept") or "").split(",")
    assert ".xlsx" in accepted and ".gz" in accepted
    expect(page.get_by_label("Sheet", exact=True)).to_have_count(0)  # no workbook yet
    page.get_by_label("requestedBy", exact=True).fill("ann")
    page.get_by_label("Created by", exact=True).fill(creator)
    file_input.set_input_files(str(upload))
    expect(page.get_by_role("status").filter(has_text="not read in the browser")).to_be_visible()

    sheet = page.get_by_label("Sheet", exact=True)
    sheet.fill("Nope")
    page.get_by_role("button", name="Validate").click()
    expect(page.get_by_role("alert").filter(has_text="Nope")).to_contain_text("People")
    sheet.fill("People")
    page.get_by_role("button", name="Validate").click()
    expect(page.get_by_role("status").filter(has_text="Validation passed")).to_be_visible()
    page.get_by_role("button", name="Create operation").click()

    expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text("Status: Completed")
    [create] = sent_forms(page, "/api/bulks")
    assert (create["fields"]["file"], create["fields"]["sheet"]) == ("file:people.xlsx", "People")
    [operation] = created_by(instance, creator)
    assert page.url.endswith(f"/dashboard/bulks/{operation['id']}")
    assert (operation["totalRows"], operation["successfulRows"]) == (2, 2)


def test_a_gzip_upload_shows_its_columns_and_completes(
    page: Page, instance: Instance, creator: str, tmp_path: Path
) -> None:
    """A .csv.gz file's header is read in the page through DecompressionStream; no Sheet
    field is offered for it."""
    upload = tmp_path / "people.csv.gz"
    upload.write_bytes(gzip.compress(b"name,email\nAnn,ann@example.com\nBob,bob@example.com\n"))

    page.goto("/dashboard/new?operation=gated-import")
    page.get_by_label("requestedBy", exact=True).fill("ann")
    page.get_by_label("Created by", exact=True).fill(creator)
    page.get_by_label("File", exact=True).set_input_files(str(upload))
    expect(page.get_by_role("status").filter(has_text="Columns found")).to_have_text(
        "Columns found: name, email."
    )
    expect(page.get_by_label("Sheet", exact=True)).to_have_count(0)
    page.get_by_role("button", name="Create operation").click()

    expect(page.get_by_role("status").filter(has_text="Status:")).to_have_text("Status: Completed")
    [operation] = created_by(instance, creator)
    assert (operation["totalRows"], operation["successfulRows"]) == (2, 2)
