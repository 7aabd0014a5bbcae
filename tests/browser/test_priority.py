"""Priority on the list and the operation page, and a running operation's share."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.browser.conftest import Instance

GOOD = "name,email\nann,ann@example.com\n"


def test_priority_and_share_are_shown(
    page: Page, instance: Instance, creator: str, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    response = httpx.post(
        f"{instance.url}/api/bulks",
        data={
            "operationName": "gated-import",
            "metadata": json.dumps({"requestedBy": "me", "gate": str(gate)}),
            "createdBy": creator,
            "priority": "7",
        },
        files={"file": ("rows.csv", GOOD.encode(), "text/csv")},
        headers=instance.headers(),
    )
    assert response.status_code == 201, response.text
    operation_id = response.json()["operationId"]
    instance.wait_status(operation_id, {"Running"})

    page.goto(f"/dashboard?createdBy={creator}")
    rows = page.get_by_role("region", name="Operations").locator("tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.nth(0).locator('td[data-label="Priority"]')).to_have_text("7")

    page.goto(f"/dashboard/bulks/{operation_id}")
    term = page.locator(".term").filter(has=page.locator("dt", has_text="Priority"))
    expect(term.locator("dd")).to_have_text("7")
    expect(page.get_by_test_id("sharing")).to_contain_text("priority 7")

    gate.touch()
    instance.wait_terminal(operation_id)
    expect(page.get_by_test_id("sharing")).to_have_count(0)
