"""The dashboard served by a gateway, over a real backend: the list across backends, an
operation page, and a retry from the failed-rows table, all through the gateway."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import Console, Instance, open_page, start_instance
from tests.browser.test_operation import PEOPLE
from tests.e2e.conftest import Process, free_port, wait_ready


@pytest.fixture(scope="module")
def through_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    """A backend instance and a `bulkops gateway` in front of it; the Instance's URL is the
    gateway's."""
    tmp = tmp_path_factory.mktemp("gateway-dashboard")
    (tmp / "backend").mkdir()
    backend, backend_url = start_instance(tmp / "backend")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BULKOPS_")}
    env.update({"BULKOPS_GATEWAY_BACKENDS": f"team={backend_url}", "PYTHONUNBUFFERED": "1"})
    port = free_port()
    gateway = Process(["gateway", "--port", str(port)], env, tmp / "gateway.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(gateway, url, timeout=90)
        yield Instance(url=url, tmp=tmp)
    finally:
        gateway.stop()
        backend.stop()


@pytest.fixture
def gateway_page(browser: Browser, console: Console, through_gateway: Instance) -> Iterator[Page]:
    opened = open_page(browser, console, through_gateway.url)
    try:
        yield opened
    finally:
        opened.context.close()
    assert not console.problems, "\n".join(console.problems)


def test_the_gateway_dashboard_lists_opens_and_retries(
    gateway_page: Page, through_gateway: Instance, creator: str, tmp_path: Path
) -> None:
    page, instance = gateway_page, through_gateway
    fail_list = tmp_path / "fail-list"
    fail_list.write_text("bob\n")
    metadata = {"requestedBy": "me", "failList": str(fail_list)}
    operation_id = instance.submit("gated-import", PEOPLE, metadata, created_by=creator)
    instance.wait_terminal(operation_id)

    page.goto(f"/dashboard?createdBy={creator}")
    rows = page.get_by_role("region", name="Operations").locator("tbody tr")
    expect(rows).to_have_count(1)
    page.get_by_role("link", name=f"Operation gated-import {operation_id}").click()
    expect(page).to_have_url(f"{instance.url}/dashboard/bulks/{operation_id}")
    failed = page.get_by_role("region", name="Failed rows table")
    expect(failed).to_contain_text("bob@example.com")

    fail_list.write_text("")
    page.get_by_role("checkbox", name="Select row 2").check()
    page.get_by_role("button", name="Retry selected rows (1)").click()
    expect(page.get_by_role("status").filter(has_text="Retry submitted")).to_contain_text(
        "Retry submitted 1 row"
    )
    expect(failed).not_to_contain_text("bob@example.com")
    detail = instance.get(f"/api/bulks/{operation_id}")
    assert detail["retryCount"] == 1
