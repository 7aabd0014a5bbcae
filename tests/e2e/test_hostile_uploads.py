"""Hostile uploads against a real ``bulkops serve``: each gets a clear answer, the server's
memory stays bounded, and a rejected upload leaves nothing stored."""

from __future__ import annotations

import json
import resource
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Process, serve, wait_terminal

pytestmark = pytest.mark.one_core

PEAK_RSS_LIMIT = 200 * 1024 * 1024
META = json.dumps({"requestedBy": "e2e"})


def peak_rss(process: Process) -> int:
    """The most memory the process has held (VmHWM), in bytes."""
    status = Path(f"/proc/{process.popen.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def submit(url: str, path: Path, name: str, *, metadata: str = META) -> httpx.Response:
    with path.open("rb") as fh:
        return httpx.post(
            f"{url}/api/bulks",
            data={"operationName": "import-users", "metadata": metadata},
            files={"file": (name, fh, "application/octet-stream")},
            timeout=120,
        )


def errors_of(url: str, operation_id: str) -> list[dict[str, object]]:
    body = httpx.get(f"{url}/api/bulks/{operation_id}/errors").json()
    items: list[dict[str, object]] = body["items"]
    return items


def write_chunks(path: Path, parts: Iterator[bytes]) -> Path:
    with path.open("wb") as fh:
        for part in parts:
            fh.write(part)
    return path


def huge_field(path: Path) -> Path:
    def parts() -> Iterator[bytes]:
        yield b"name,email\nAda,"
        block = b"a" * 1_000_000
        for _ in range(100):  # 100 MB, just under the default upload limit of 100 MiB
            yield block
        yield b"\nBob,bob@example.com\n"

    return write_chunks(path, parts())


@pytest.fixture
def server(spawn: Callable[..., Process]) -> tuple[Process, str]:
    return serve(spawn)


def test_hostile_files_end_cleanly_in_bounded_memory(
    server: tuple[Process, str], tmp_path: Path
) -> None:
    process, url = server
    depth = 100_000
    cases: list[tuple[str, Path, str, set[int]]] = [
        # (name, file, expected final status, failed rows)
        ("field.csv", huge_field(tmp_path / "field.csv"), "CompletedWithErrors", {1}),
        (
            "deep.json",
            write_chunks(
                tmp_path / "deep.json",
                iter(
                    [
                        b"[",
                        b"[" * depth,
                        b"]" * depth,
                        b', {"name": "Bob", ',
                        b'"email": "bob@example.com"}]',
                    ]
                ),
            ),
            "CompletedWithErrors",
            {1},
        ),
        (
            "wide.csv",
            write_chunks(
                tmp_path / "wide.csv",
                iter(
                    [
                        ",".join(["name", "email", *(f"c{i}" for i in range(10_000))]).encode(),
                        b"\n",
                        b"Ada,ada@example.com" + b",x" * 10_000 + b"\n",
                    ]
                ),
            ),
            "Completed",
            set(),
        ),
        (
            "nul.csv",
            write_chunks(tmp_path / "nul.csv", iter([b"name,email\nA\x00da,ada@example.com\n"])),
            "Completed",
            set(),
        ),
    ]
    for name, path, expected, failed in cases:
        response = submit(url, path, name)
        assert response.status_code == 201, (name, response.text)
        operation_id = response.json()["operationId"]
        status = wait_terminal(url, operation_id, timeout=120)
        assert status["status"] == expected, (name, status)
        assert {e["rowNumber"] for e in errors_of(url, operation_id)} == failed, name
    messages = [e["errorMessage"] for e in errors_of(url, operation_id)]
    assert messages == []
    assert peak_rss(process) < PEAK_RSS_LIMIT, peak_rss(process)


def test_undecodable_and_unclosed_files_fail_with_a_message(
    server: tuple[Process, str], tmp_path: Path
) -> None:
    process, url = server
    for name, content, message in [
        (
            "bad.csv",
            b"name,email\nAda,ada@example.com\n\xff\xfe,x\n",
            "not valid UTF-8 (near row 2)",
        ),
        ("open.json", b"[" * 200_000, "near row 1"),
    ]:
        path = tmp_path / name
        path.write_bytes(content)
        response = submit(url, path, name)
        assert response.status_code == 201, response.text
        operation_id = response.json()["operationId"]
        assert wait_terminal(url, operation_id)["status"] == "Failed"
        detail = httpx.get(f"{url}/api/bulks/{operation_id}").json()
        assert message in detail["errorMessage"]
    assert peak_rss(process) < PEAK_RSS_LIMIT


def test_validate_answers_hostile_files_in_bounded_memory(
    server: tuple[Process, str], tmp_path: Path
) -> None:
    process, url = server
    path = huge_field(tmp_path / "field.csv")
    with path.open("rb") as fh:
        response = httpx.post(
            f"{url}/api/bulks/validate",
            data={"operationName": "import-users", "metadata": META},
            files={"file": ("field.csv", fh, "text/csv")},
            timeout=120,
        )
    assert response.status_code == 422
    assert response.json()["fileErrors"] == ["Row 1: record is larger than 8 MiB"]
    assert peak_rss(process) < PEAK_RSS_LIMIT


def test_a_10_mb_metadata_part_is_refused_and_nothing_is_stored(
    server: tuple[Process, str], tmp_path: Path
) -> None:
    _, url = server
    path = tmp_path / "users.csv"
    path.write_bytes(b"name,email\nAda,ada@example.com\n")
    metadata = json.dumps({"requestedBy": "x" * (10 * 1024 * 1024)})
    response = submit(url, path, "users.csv", metadata=metadata)
    assert response.status_code == 413
    assert "form field exceeds" in response.json()["error"]
    assert httpx.get(f"{url}/api/bulks").json()["totalCount"] == 0
    files = tmp_path / "files"
    assert not files.exists() or not any(p.is_file() for p in files.rglob("*"))


def _small_disk() -> None:
    """In the served process: no file may grow past 8 MB, as on a nearly full disk (writes
    beyond fail with an error instead of killing the process)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (8_000_000, 8_000_000))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_a_disk_full_during_an_upload_is_a_503_and_keeps_nothing(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    _, url = serve(spawn, preexec=_small_disk)
    path = write_chunks(tmp_path / "big.csv", iter([b"name,email\n", b"a,a@x.io\n" * 2_000_000]))
    response = submit(url, path, "big.csv")
    assert response.status_code == 503, response.text
    assert response.json()["error"] == "Storage is unavailable; try again later"
    assert httpx.get(f"{url}/api/bulks").json()["totalCount"] == 0
    files = tmp_path / "files"
    assert not files.exists() or not any(p.is_file() for p in files.rglob("*"))
    small = submit(url, _tiny(tmp_path), "small.csv")
    assert small.status_code == 201  # the service goes on once the upload fits


def _tiny(tmp_path: Path) -> Path:
    path = tmp_path / "small.csv"
    path.write_bytes(b"name,email\nAda,ada@example.com\n")
    return path
