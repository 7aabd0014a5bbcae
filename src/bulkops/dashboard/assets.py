"""The dashboard's static files: which may be served, their media types, ETags and the page."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

STATIC_DIR = Path(__file__).with_name("static")
INDEX_FILE = "index.html"

# Only these kinds of file are served; anything else under static/ (notes for maintainers)
# stays private.
_MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    "LICENSE": "text/plain; charset=utf-8",
}
_BASE_MARK = "__BASE__"
_IMPORT_MAP_START = '<script type="importmap">'


@dataclass(frozen=True, slots=True)
class Asset:
    """One file the dashboard serves.

    Attributes:
        path: Where the file is on disk.
        media_type: The Content-Type header value.
        etag: A strong validator derived from the content, quoted as HTTP wants it.
    """

    path: Path
    media_type: str
    etag: str


def _media_type(path: Path) -> str | None:
    return _MEDIA_TYPES.get(path.suffix) or _MEDIA_TYPES.get(path.name)


def collect_assets(root: Path = STATIC_DIR) -> dict[str, Asset]:
    """Every servable file under ``root``, by its ``/``-separated path relative to it.

    The catalogue is built once, so a request can only ever name a file listed here and a
    crafted path (``..``, absolute, encoded) simply is not found.
    """
    assets: dict[str, Asset] = {}
    for path in sorted(root.rglob("*")):
        media_type = _media_type(path)
        if not path.is_file() or media_type is None or path.name == INDEX_FILE:
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:20]
        assets[path.relative_to(root).as_posix()] = Asset(path, media_type, f'"{digest}"')
    return assets


@dataclass(frozen=True, slots=True)
class Page:
    """The single HTML page, rendered for one URL prefix.

    Attributes:
        body: The HTML text.
        content_security_policy: The CSP header value: scripts only from this origin plus
            the page's own import map (by hash), requests only to this origin.
    """

    body: str
    content_security_policy: str


def _import_map_hash(body: str) -> str:
    start = body.index(_IMPORT_MAP_START) + len(_IMPORT_MAP_START)
    end = body.index("</script>", start)
    digest = hashlib.sha256(body[start:end].encode()).digest()
    return "sha256-" + base64.b64encode(digest).decode()


def render_page(base: str, root: Path = STATIC_DIR) -> Page:
    """The dashboard page for an app mounted under the URL prefix ``base`` ("" at the root).

    Every URL in the page (assets, import map, API base) is made absolute with ``base``, so
    deep links such as ``/dashboard/bulks/{id}`` load the same page.
    """
    template = (root / INDEX_FILE).read_text(encoding="utf-8")
    # Percent-encoding leaves nothing that could end an attribute, a script or a JSON string.
    body = template.replace(_BASE_MARK, quote(base.rstrip("/"), safe="/"))
    policy = "; ".join(
        (
            "default-src 'self'",
            f"script-src 'self' '{_import_map_hash(body)}'",
            "style-src 'self'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        )
    )
    return Page(body=body, content_security_policy=policy)
