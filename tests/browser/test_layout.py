"""Every page at 1280 px and at 375 px: every control named, nothing wider than the screen,
keyboard reachable; the README's screenshots are taken here."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import DESKTOP, PHONE, Console, Instance, open_page

# Roles a user operates; each needs a name that says what it does.
CONTROL_ROLES = {
    "button",
    "checkbox",
    "combobox",
    "link",
    "listbox",
    "radio",
    "searchbox",
    "slider",
    "spinbutton",
    "switch",
    "textbox",
    "DateTime",
    "Date",
    "InputTime",
    "progressbar",
    "region",
}


def unnamed_controls(page: Page) -> list[str]:
    """Controls (and focusable elements) whose accessible name is empty, per Chromium."""
    session = page.context.new_cdp_session(page)
    try:
        nodes: list[dict[str, Any]] = session.send("Accessibility.getFullAXTree")["nodes"]
        problems = []
        for node in nodes:
            if node.get("ignored"):
                continue
            role = str(node.get("role", {}).get("value", ""))
            name = str((node.get("name") or {}).get("value", "")).strip()
            properties = {p["name"]: p["value"].get("value") for p in node.get("properties", [])}
            needs_name = role in CONTROL_ROLES or (
                properties.get("focusable") and role != "RootWebArea"
            )
            if needs_name and not name:
                described = session.send(
                    "DOM.describeNode", {"backendNodeId": node["backendDOMNodeId"]}
                )["node"]
                problems.append(f"{role}: <{described['localName']} {described.get('attributes')}>")
        return problems
    finally:
        session.detach()


def overflow(page: Page) -> int:
    """How many CSS pixels the page is wider than the window (0: no sideways scrolling)."""
    width: int = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    return width


@pytest.fixture(scope="module")
def scenes(
    instance: Instance, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """Operations to look at: finished ones in the list, one waiting for signals with a
    failed row, and a file whose columns need mapping."""
    creator = "layout"
    good = "name,email\nann,ann@example.com\nbob,bob@example.com\n"
    instance.submit("import-users", good, {"requestedBy": "ops"}, created_by=creator)
    users = (Path(__file__).parents[2] / "examples" / "users.csv").read_text()
    imported = instance.submit(
        "import-users", users, {"requestedBy": "ops"}, created_by=creator, file_name="users.csv"
    )
    instance.wait_terminal(imported)
    waiting = instance.submit(
        "approval", "name\nann\nbob\ncid\nann\n", {"requestedBy": "ops"}, created_by=creator
    )
    instance.wait_status(waiting, {"Running"})
    response = instance.get(f"/api/bulks/{waiting}/rows", state="WaitingForCompletion")
    assert response["totalCount"] == 4
    mapped = tmp_path_factory.mktemp("layout") / "new-hires.csv"
    mapped.write_text("Full Name;E-Mail;Age\nAnn Lee;ann@example.com;34\n")
    yield {"imported": imported, "waiting": waiting, "mapped": str(mapped)}
    for key in ("ann", "bob", "cid", "ann"):  # finish it, freeing its worker slot
        httpx.post(f"{instance.url}/api/bulks/{waiting}/signal/{key}", headers=instance.headers())


def visit(page: Page, name: str, scenes: dict[str, str]) -> None:
    """Open one of the pages under test and wait until it shows its data."""
    if name == "list":
        page.goto("/dashboard?createdBy=layout")
        expect(page.get_by_role("region", name="Operations").locator("tbody tr")).to_have_count(3)
    elif name == "operation":
        page.goto(f"/dashboard/bulks/{scenes['waiting']}")
        expect(page.get_by_role("button", name="Signal success for ann")).to_be_visible()
        expect(page.get_by_role("region", name="Rows and steps table")).to_be_visible()
    elif name == "failed-rows":
        page.goto(f"/dashboard/bulks/{scenes['imported']}")
        expect(page.get_by_role("region", name="Failed rows table")).to_be_visible()
    elif name == "create":
        page.goto("/dashboard/new?operation=import-users")
        page.get_by_label("requestedBy", exact=True).fill("ops")
        page.get_by_label("File", exact=True).set_input_files(scenes["mapped"])
        expect(page.get_by_role("region", name="Column mapping")).to_be_visible()
        page.get_by_role("button", name="Add webhook").click()
        page.get_by_label("Webhook URL 1").fill("https://hooks.example.com/bulkops")
    elif name == "events":
        page.goto("/dashboard/events")
        page.get_by_role("button", name="Show the 100 latest events").click()
        expect(page.get_by_role("region", name="Events")).to_be_visible()


PAGES = ["list", "operation", "failed-rows", "create", "events"]


@pytest.fixture(params=[DESKTOP, PHONE], ids=["1280px", "375px"])
def sized_page(
    request: pytest.FixtureRequest, browser: Browser, console: Console, instance: Instance
) -> Iterator[Page]:
    """A page at desktop or phone width; fails on console errors like ``page``."""
    if not instance.serves("/api/bulks/{id}/notifications"):
        console.expect(404, "/notifications")
    opened = open_page(browser, console, instance.url, viewport=request.param)
    try:
        yield opened
    finally:
        opened.context.close()
    assert not console.problems, "\n".join(console.problems)


@pytest.mark.parametrize("name", PAGES)
def test_every_control_is_named_and_nothing_overflows(
    sized_page: Page,
    name: str,
    scenes: dict[str, str],
    shoot: Callable[[Page, str], Path],
) -> None:
    visit(sized_page, name, scenes)
    assert unnamed_controls(sized_page) == []
    assert overflow(sized_page) == 0
    width = sized_page.viewport_size["width"] if sized_page.viewport_size else 0
    shoot(sized_page, f"{name}-{'phone' if width < 500 else 'desktop'}")


def test_keyboard_reaches_the_navigation_and_the_form(page: Page) -> None:
    page.goto("/dashboard")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="bulkops")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="New operation").first).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("New operation")
    expect(page.get_by_role("heading", level=1)).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_label("Operation", exact=True)).to_be_focused()


def test_the_name_check_finds_unnamed_controls(page: Page) -> None:
    page.goto("/dashboard")
    expect(page.get_by_role("heading", level=1)).to_have_text("Operations")
    assert unnamed_controls(page) == []
    page.evaluate(
        """document.querySelector("main").insertAdjacentHTML(
            "beforeend", '<button type="button"></button><input type="text">')"""
    )
    assert [problem.split(":")[0] for problem in unnamed_controls(page)] == ["button", "textbox"]
