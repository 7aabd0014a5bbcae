"""What the service serves for the dashboard, over plain HTTP, and what the wheel ships."""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
import zipfile
from pathlib import Path

import httpx

from bulkops.dashboard.assets import STATIC_DIR
from tests.browser.conftest import Instance

ROOT = Path(__file__).parents[2]


def test_root_redirects_and_every_page_url_serves_the_page(instance: Instance) -> None:
    root = httpx.get(f"{instance.url}/")
    assert (root.status_code, root.headers["location"]) == (307, "/dashboard")
    for path in (
        "/dashboard",
        "/dashboard/new",
        "/dashboard/events",
        f"/dashboard/bulks/{uuid.uuid4()}",
    ):
        response = httpx.get(f"{instance.url}{path}")
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith("text/html")
        assert response.headers["cache-control"] == "no-cache"
        assert '<script type="module" src="/dashboard/assets/js/main.js">' in response.text


def test_the_content_security_policy_allows_exactly_the_import_map(instance: Instance) -> None:
    response = httpx.get(f"{instance.url}/dashboard")
    policy = response.headers["content-security-policy"]
    import_map = re.search(r'<script type="importmap">(.*?)</script>', response.text, re.S)
    assert import_map
    digest = hashlib.sha256(import_map.group(1).encode()).digest()
    assert f"'sha256-{base64.b64encode(digest).decode()}'" in policy
    assert "connect-src 'self'" in policy and "'unsafe-inline'" not in policy


def test_assets_are_served_with_types_and_revalidation(instance: Instance) -> None:
    script = httpx.get(f"{instance.url}/dashboard/assets/js/main.js")
    assert script.status_code == 200
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    again = httpx.get(
        f"{instance.url}/dashboard/assets/js/main.js",
        headers={"If-None-Match": script.headers["etag"]},
    )
    assert (again.status_code, again.content) == (304, b"")
    licence = httpx.get(f"{instance.url}/dashboard/assets/vendor/preact/LICENSE")
    assert licence.headers["content-type"].startswith("text/plain") and "MIT" in licence.text


def test_unknown_files_and_pages_are_404_with_the_error_body(instance: Instance) -> None:
    for path in (
        "/dashboard/assets/nope.js",
        "/dashboard/assets/../../pyproject.toml",
        "/dashboard/assets/%2e%2e/%2e%2e/pyproject.toml",
        "/dashboard/assets/vendor/README.md",  # kept for maintainers, not served
        "/dashboard/assets/index.html",
        "/dashboard/elsewhere",
    ):
        response = httpx.get(f"{instance.url}{path}")
        assert response.status_code == 404, path
        assert set(response.json()) == {"error"}, path


def test_the_api_description_does_not_list_the_dashboard(instance: Instance) -> None:
    paths = httpx.get(f"{instance.url}/openapi/v1.json").json()["paths"]
    assert not [path for path in paths if path == "/" or path.startswith("/dashboard")]


def test_the_wheel_ships_every_dashboard_file(tmp_path: Path) -> None:
    from hatchling.builders.wheel import WheelBuilder

    [wheel] = list(WheelBuilder(str(ROOT)).build(directory=str(tmp_path), versions=["standard"]))
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    expected = {
        f"bulkops/dashboard/static/{path.relative_to(STATIC_DIR).as_posix()}"
        for path in STATIC_DIR.rglob("*")
        if path.is_file()
    }
    assert len(expected) > 20
    assert expected <= shipped
