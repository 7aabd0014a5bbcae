"""The documentation site's search works from ``site/index.html`` opened as a file, with no
network (mkdocs-material's offline plugin and the vendored iframe-worker shim)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import Browser, Route, expect

ROOT = Path(__file__).resolve().parents[2]


def test_search_from_the_file_system_without_network(browser: Browser, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=True,
        timeout=240,
    )
    context = browser.new_context()
    fetched: list[str] = []

    def refuse(route: Route) -> None:
        fetched.append(route.request.url)
        route.abort()

    context.route("http*://**", refuse)  # the site must need no network at all
    try:
        page = context.new_page()
        page.goto((site / "index.html").as_uri())
        page.locator(".md-search__input").first.click()
        page.keyboard.type("idempotency", delay=20)
        expect(page.locator(".md-search-result__item").first).to_be_visible(timeout=15_000)
    finally:
        context.close()
    assert fetched == []
