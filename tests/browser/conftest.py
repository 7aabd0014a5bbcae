"""Dashboard tests: a real ``bulkops serve`` process and Debian's chromium driven by Playwright.

Playwright never downloads a browser here: it launches ``/usr/bin/chromium`` (``.ci/run``
installs the package). Every test gets a fresh browser context and fails when the page logs
a console error or throws, unless the test declared that exact HTTP answer as expected.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect, sync_playwright

from tests.e2e.conftest import ONE_CORE, TERMINAL, Process, free_port, wait_for, wait_ready

HERE = Path(__file__).parent
CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 812}
# `make screenshots` sets this to docs/screenshots; otherwise screenshots go to tmp_path.
SCREENSHOTS_ENV = "DASHBOARD_SCREENSHOTS"
OPERATIONS = f"bulkops.examples.operations,{HERE / 'browser_operations.py'}"

pytestmark = pytest.mark.e2e

# Assertions poll for up to 15 s: the machine may be busy with other test runs.
expect.set_options(timeout=15_000)


@dataclass
class Instance:
    """A running service: its URL, a scratch directory, and an HTTP client for set-up."""

    url: str
    tmp: Path
    token: str | None = None
    _count: int = field(default=0)

    def serves(self, path: str) -> bool:
        """Whether the API description lists ``path``."""
        description = httpx.get(f"{self.url}/openapi/v1.json", headers=self.headers()).json()
        return path in description["paths"]

    def headers(self) -> dict[str, str]:
        """Authorization for set-up requests on a secured instance."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def submit(
        self,
        operation: str,
        content: str,
        metadata: dict[str, Any],
        *,
        created_by: str,
        file_name: str = "rows.csv",
    ) -> str:
        """Create an operation over HTTP and return its id."""
        response = httpx.post(
            f"{self.url}/api/bulks",
            data={
                "operationName": operation,
                "metadata": json.dumps(metadata),
                "createdBy": created_by,
            },
            files={"file": (file_name, content.encode(), "text/csv")},
            headers=self.headers(),
        )
        assert response.status_code == 201, response.text
        return str(response.json()["operationId"])

    def get(self, path: str, **params: Any) -> Any:
        """GET a JSON body."""
        response = httpx.get(f"{self.url}{path}", params=params, headers=self.headers())
        assert response.status_code == 200, response.text
        return response.json()

    def wait_status(self, operation_id: str, statuses: set[str], timeout: float = 30) -> None:
        """Poll the status view until it is one of ``statuses``."""
        wait_for(
            lambda: self.get(f"/api/bulks/{operation_id}/status")["status"] in statuses,
            timeout=timeout,
            what=f"{operation_id} to reach {statuses}",
        )

    def wait_terminal(self, operation_id: str, timeout: float = 30) -> None:
        """Poll the status view until the operation finished."""
        self.wait_status(operation_id, TERMINAL, timeout)

    def scratch(self, name: str) -> Path:
        """A path under the instance's scratch directory that no other test uses."""
        self._count += 1
        return self.tmp / f"{self._count}-{name}"


def start_instance(tmp: Path, **settings: str) -> tuple[Process, str]:
    """``bulkops serve`` on a free port with the examples and the test operations, with a
    one-core machine's process counts (the dashboard's tests are not about processes)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BULKOPS_")}
    env.update(
        {
            **ONE_CORE,
            "BULKOPS_DATABASE_URL": f"sqlite:///{tmp}/bulkops.db",
            "BULKOPS_FILES_URL": f"file://{tmp}/files",
            "BULKOPS_OPERATIONS": OPERATIONS,
            "BULKOPS_FLUSH_INTERVAL": "0.1",
            "BULKOPS_WORKER_COUNT": "8",
            "BULKOPS_MAX_ROW_CONCURRENCY": "4",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update({f"BULKOPS_{k.upper()}": v for k, v in settings.items()})
    port = free_port()
    process = Process(["serve", "--port", str(port)], env, tmp / "serve.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(process, url, timeout=90)  # the machine may be busy with other test runs
    except BaseException:
        process.stop()
        raise
    return process, url


@pytest.fixture(scope="session")
def instance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    """One service shared by the session; tests tell their operations apart by creator."""
    tmp = tmp_path_factory.mktemp("dashboard")
    process, url = start_instance(tmp)
    try:
        yield Instance(url=url, tmp=tmp)
    finally:
        process.stop()


# Module scope: Playwright's sync API keeps an event loop running while it is started, and
# the asyncio tests that run after the browser tests need the thread's loop back.
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's headless chromium (Playwright gives each launch a fresh profile)."""
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: `apt-get install -y chromium` (.ci/run does it)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


_NETWORK_ERROR = re.compile(r"Failed to load resource: the server responded with a status of (\d+)")


class Console:
    """Collects console errors and uncaught exceptions of one page."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self._expected: list[tuple[int, str]] = []

    def expect(self, status: int, path: str) -> None:
        """Allow the browser's log line for an answer ``status`` from a URL containing ``path``
        (the dashboard shows such answers itself, e.g. 422 from validate)."""
        self._expected.append((status, path))

    def on_message(self, message: ConsoleMessage) -> None:
        if message.type != "error":
            return
        url = str(message.location.get("url", ""))
        network = _NETWORK_ERROR.search(message.text)
        if network and any(
            int(network.group(1)) == status and path in url for status, path in self._expected
        ):
            return
        self.problems.append(f"console error: {message.text} ({url})")

    def on_page_error(self, error: Exception) -> None:
        self.problems.append(f"uncaught: {error}")


@pytest.fixture
def console() -> Console:
    """The console of the test's page."""
    return Console()


def open_page(browser: Browser, console: Console, base_url: str, **options: Any) -> Page:
    """A page in a fresh context whose console problems go to ``console``."""
    context = browser.new_context(
        base_url=base_url,
        accept_downloads=True,
        viewport=options.pop("viewport", DESKTOP),
        timezone_id="UTC",  # times on screen and datetime inputs do not depend on the machine
        locale="en-US",
    )
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.on("console", console.on_message)
    page.on("pageerror", console.on_page_error)
    return page


@pytest.fixture
def page(browser: Browser, console: Console, instance: Instance) -> Iterator[Page]:
    """A desktop-sized page on the shared instance; the test fails on any console error."""
    if not instance.serves("/api/bulks/{id}/notifications"):
        # A service without delivery records answers 404 to the page's one probe for them.
        console.expect(404, "/notifications")
    opened = open_page(browser, console, instance.url)
    try:
        yield opened
    finally:
        opened.context.close()
    assert not console.problems, "\n".join(console.problems)


@pytest.fixture
def creator(request: pytest.FixtureRequest) -> str:
    """A creator name unique to the test, to find its own operations in the shared list."""
    return re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:60]


def documented(reference: str) -> bool:
    """Whether README.md or a page of docs/ shows this image: ``make screenshots`` keeps
    only those."""
    root = Path(__file__).resolve().parents[2]
    pages = [root / "README.md", *(root / "docs").rglob("*.md")]
    return any(reference in page.read_text() for page in pages)


@pytest.fixture
def shoot(tmp_path: Path) -> Callable[[Page, str], Path]:
    """``shoot(page, name)`` saves a full-page screenshot; with DASHBOARD_SCREENSHOTS set
    (``make screenshots``) it is also copied there when a page shows it."""

    def take(page: Page, name: str) -> Path:
        path = tmp_path / f"{name}.png"
        page.screenshot(path=str(path), full_page=True, animations="disabled")
        target = os.environ.get(SCREENSHOTS_ENV)
        if target and documented(f"screenshots/{path.name}"):
            Path(target).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, Path(target) / path.name)
        return path

    return take
