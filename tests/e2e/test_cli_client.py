"""The command-line client as a user runs it: subprocesses against a real served instance,
checking exit codes, --json shapes, progress when piped, and a secured instance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bulkops.cli.client.fix import Fix, read_export
from bulkops.client import Client
from tests.e2e.conftest import Process, serve, status_of, wait_for, wait_terminal

pytestmark = pytest.mark.one_core

USERS = "name,email,age\nAda,ada@example.com,36\nBob,bob@example.com,41\n"
MIXED = "name,email,age\nAda,ada@example.com,36\nBob,bob-at-example,3\n"
META = json.dumps({"requestedBy": "cli-tests"})


def bulkops(
    url: str, *args: str, token: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``bulkops ARGS`` against ``url``, as a shell would (output piped)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("BULKOPS_")}
    environment.update(env)
    environment["BULKOPS_URL"] = url
    if token is not None:
        environment["BULKOPS_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "bulkops", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )


@pytest.fixture
def instance(spawn: Callable[..., Process]) -> str:
    _, url = serve(spawn)
    return url


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_submit_wait_gives_the_outcome_as_exit_code(instance: str, tmp_path: Path) -> None:
    good = write(tmp_path, "good.csv", USERS)
    mixed = write(tmp_path, "mixed.csv", MIXED)
    broken = write(tmp_path, "broken.csv", "nom,courriel\nx,y\n")  # required columns missing
    wait = ["--wait", "--poll-interval", "0.1"]

    done = bulkops(instance, "submit", str(good), "-o", "import-users", "--metadata", META, *wait)
    errors = bulkops(
        instance, "submit", str(mixed), "-o", "import-users", "--metadata", META, *wait
    )
    failed = bulkops(
        instance, "submit", str(broken), "-o", "import-users", "--metadata", META, *wait
    )

    assert done.returncode == 0, done.stderr
    assert errors.returncode == 3, errors.stderr
    assert failed.returncode == 4, failed.stderr
    # Piped: the id on stdout, plain progress lines on stderr (no bar, no escape codes).
    operation_id = done.stdout.splitlines()[0]
    assert status_of(instance, operation_id)["status"] == "Completed"
    assert "Completed: 2/2 rows" in done.stdout
    assert "rows/s" in done.stderr and "\x1b[" not in done.stderr


def test_a_cancelled_operation_waits_out_with_5(instance: str, tmp_path: Path) -> None:
    gated = write(tmp_path, "gated.csv", "name\nwait-1\n")
    meta = json.dumps({"gate": str(tmp_path / "never"), "log": str(tmp_path / "log")})
    created = bulkops(instance, "submit", str(gated), "-o", "file-gated", "--metadata", meta)
    assert created.returncode == 0, created.stderr
    operation_id = created.stdout.strip()
    wait_for(lambda: status_of(instance, operation_id)["status"] == "Running", what="Running")

    cancelled = bulkops(instance, "cancel", operation_id, "--json")
    waited = bulkops(instance, "wait", operation_id, "--poll-interval", "0.1")

    assert cancelled.returncode == 0 and json.loads(cancelled.stdout)["status"] == "Cancelled"
    assert waited.returncode == 5
    again = bulkops(instance, "cancel", operation_id)
    assert again.returncode == 2 and again.stderr.startswith("Error: ")
    assert "cannot be cancelled" in again.stderr


def test_json_shapes_and_reads(instance: str, tmp_path: Path) -> None:
    mixed = write(tmp_path, "mixed.csv", MIXED)
    created = bulkops(
        instance, "submit", str(mixed), "-o", "import-users", "--metadata", META, "--json"
    )
    operation_id = json.loads(created.stdout)["operationId"]
    wait_terminal(instance, operation_id)

    status = json.loads(bulkops(instance, "status", operation_id, "--json").stdout)
    errors = json.loads(bulkops(instance, "errors", operation_id, "--json").stdout)
    operations = json.loads(bulkops(instance, "operations", "--json").stdout)
    listing = json.loads(bulkops(instance, "list", "--json").stdout)
    events = json.loads(bulkops(instance, "events", operation_id, "--json").stdout)
    rows = json.loads(bulkops(instance, "rows", operation_id, "--json").stdout)

    assert status["status"] == "CompletedWithErrors" and status["processedRows"] == 2
    assert [row["rowNumber"] for row in errors] == [2] and errors[0]["errorType"] == "Validation"
    assert "import-users" in {descriptor["name"] for descriptor in operations}
    assert listing["items"][0]["id"] == operation_id and listing["totalCount"] == 1
    assert events[0]["type"] == "Created" and events[-1]["type"] == "Completed"
    assert [row["rowNumber"] for row in rows] == [1, 2]
    table = bulkops(instance, "errors", operation_id)
    assert "bob-at-example" in table.stdout and "1 failed rows" in table.stderr
    template = bulkops(instance, "template", "import-users")
    assert template.stdout.startswith("name,email")
    original = tmp_path / "original.csv"
    assert bulkops(instance, "download", operation_id, "-o", str(original)).returncode == 0
    assert original.read_text() == MIXED
    exported = bulkops(instance, "export", operation_id, "--mode", "data", "--format", "csv")
    assert exported.stdout.splitlines()[0].startswith("name,email,age,_rowNumber")


def test_refusals_usage_errors_and_an_unreachable_server(instance: str, tmp_path: Path) -> None:
    good = write(tmp_path, "good.csv", USERS)

    unknown = bulkops(instance, "submit", str(good), "-o", "no-such-operation")
    bad_json = bulkops(instance, "submit", str(good), "-o", "import-users", "--metadata", "{")
    missing = bulkops(instance, "status", "00000000-0000-0000-0000-000000000000")
    no_server = bulkops("http://127.0.0.1:9", "status", "00000000-0000-0000-0000-000000000000")

    assert unknown.returncode == 2 and unknown.stderr.startswith("Error: ")
    assert "no-such-operation" in unknown.stderr and len(unknown.stderr.splitlines()) == 1
    assert bad_json.returncode == 2 and "--metadata is not valid JSON" in bad_json.stderr
    assert missing.returncode == 2 and "not found" in missing.stderr
    assert no_server.returncode == 1 and "Cannot reach" in no_server.stderr
    assert "Traceback" not in no_server.stderr


def test_a_secured_instance_with_and_without_a_token(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    _, url = serve(spawn, auth_tokens=json.dumps({"ops-secret-123": "operate"}))
    good = write(tmp_path, "good.csv", USERS)

    refused = bulkops(url, "submit", str(good), "-o", "import-users", "--metadata", META)
    accepted = bulkops(
        url,
        "submit",
        str(good),
        "-o",
        "import-users",
        "--metadata",
        META,
        "--wait",
        token="ops-secret-123",
    )

    assert refused.returncode == 2 and refused.stderr.startswith("Error: ")
    assert accepted.returncode == 0, accepted.stderr
    assert "ops-secret-123" not in accepted.stdout + accepted.stderr
    with Client(url, token="ops-secret-123") as client:
        operation_id = client.submit("import-users", good, {"requestedBy": "python"})
        final = client.wait(operation_id, poll_interval=0.1)
        assert final.status.value == "Completed"
        assert client.get_bulk(operation_id).created_by != "python"  # the token's principal


def test_the_sync_client_and_events_prune(spawn: Callable[..., Process], tmp_path: Path) -> None:
    _, url = serve(spawn)
    mixed = write(tmp_path, "mixed.csv", MIXED)
    with Client(url) as client:
        operation_id = client.submit("import-users", mixed, {"requestedBy": "python"})
        final = client.wait(operation_id, poll_interval=0.1)
        failed = list(client.iter_errors(operation_id))
        events = client.get_bulk_events(operation_id)
    assert final.status.value == "CompletedWithErrors"
    assert [row.row_number for row in failed] == [2]
    assert events and events[-1].type == "Completed"

    database: dict[str, Any] = {"BULKOPS_DATABASE_URL": f"sqlite:///{tmp_path}/shared.db"}
    kept = bulkops(url, "events", "prune", "--older-than", "30", **database)
    pruned = bulkops(url, "events", "prune", "--older-than", "0", **database)
    usage = bulkops(url, "events", "prune", **database)

    assert kept.returncode == 0 and kept.stdout.startswith("Removed 0 events")
    assert pruned.returncode == 0 and f"Removed {len(events)} events" in pruned.stdout
    with Client(url) as client:
        assert client.get_bulk_events(operation_id) == []
    assert usage.returncode == 2 and "--older-than" in usage.stderr


def test_piped_lists_are_tab_separated_lines_with_full_values(
    instance: str, tmp_path: Path
) -> None:
    # Long values that a table on an 80-column terminal would cut or wrap.
    email = "not-an-email-" + "x" * 120
    mixed = write(tmp_path, "mixed.csv", f"name,email,age\nAda,ada@example.com,36\nBob,{email},3\n")
    created = bulkops(instance, "submit", str(mixed), "-o", "import-users", "--metadata", META)
    operation_id = created.stdout.strip()
    wait_terminal(instance, operation_id)

    listing = bulkops(instance, "list")
    errors = bulkops(instance, "errors", operation_id)
    rows = bulkops(instance, "rows", operation_id)
    operations = bulkops(instance, "operations")

    for result in (listing, errors, rows, operations):
        assert result.returncode == 0, result.stderr
        assert not set("│┃━─┏╭…") & set(result.stdout), result.stdout
        lines = result.stdout.splitlines()
        assert all(len(line.split("\t")) == len(lines[0].split("\t")) for line in lines)
    header, *items = listing.stdout.splitlines()
    assert header.startswith("id\toperationName\tstatus\t")
    [item] = items
    assert item.split("\t")[:3] == [operation_id, "import-users", "CompletedWithErrors"]
    header, *items = errors.stdout.splitlines()
    [failed] = [dict(zip(header.split("\t"), line.split("\t"), strict=True)) for line in items]
    assert failed["rowNumber"] == "2" and failed["errorType"] == "Validation"
    assert email in failed["errorMessage"]
    assert [line.split("\t")[:3] for line in rows.stdout.splitlines()[1:]] == [
        ["1", "ada@example.com", "Completed"],
        ["2", email, "Failed"],
    ]
    assert any(line.startswith("import-users\t") for line in operations.stdout.splitlines())


def test_export_state_keeps_only_those_rows(instance: str, tmp_path: Path) -> None:
    mixed = write(tmp_path, "mixed.csv", MIXED)
    created = bulkops(instance, "submit", str(mixed), "-o", "import-users", "--metadata", META)
    operation_id = created.stdout.strip()
    wait_terminal(instance, operation_id)
    failed_csv = tmp_path / "failed.csv"

    exported = bulkops(
        instance,
        "export",
        operation_id,
        "--state",
        "Failed",
        "--mode",
        "data",
        "-o",
        str(failed_csv),
    )
    report = bulkops(instance, "export", operation_id, "--state", "completed", "--format", "jsonl")

    assert exported.returncode == 0, exported.stderr
    header, *lines = failed_csv.read_text().splitlines()
    assert header == "name,email,age,_rowNumber,_state,_errorType,_errorMessage"
    assert [line.split(",")[:5] for line in lines] == [
        ["Bob", "bob-at-example", "3", "2", "Failed"]
    ]
    assert [json.loads(line)["rowNumber"] for line in report.stdout.splitlines()] == [1]
    # The workbook export reads back, for `bulkops fix`, as the CSV one does.
    workbook = tmp_path / "failed.xlsx"
    spreadsheet = bulkops(
        instance,
        "export",
        operation_id,
        "--state",
        "Failed",
        "--mode",
        "data",
        "--format",
        "xlsx",
        "-o",
        str(workbook),
    )
    assert spreadsheet.returncode == 0, spreadsheet.stderr
    assert list(read_export(workbook)) == list(read_export(failed_csv))
    assert list(read_export(workbook)) == [
        Fix(2, {"name": "Bob", "email": "bob-at-example", "age": "3"})
    ]


TRY = (
    "name,email,age\n"
    "Ada,ada@example.com,36\n"
    "Bob,bob-at-example,41\n"
    "Cy,cy-at-example,29\n"
    "Dee,dee@blocked.example,50\n"  # valid, but refused by process_row
)


def test_dry_run_fix_then_run_from_it(instance: str, tmp_path: Path) -> None:
    source = write(tmp_path, "users.csv", TRY)
    created = bulkops(
        instance, "submit", str(source), "-o", "import-users", "--metadata", META, "--dry-run"
    )
    trial = created.stdout.strip()
    waited = bulkops(instance, "wait", trial, "--poll-interval", "0.1")

    # A dry run validates every row and processes none: Dee's blocked domain is not seen.
    assert waited.returncode == 3, waited.stderr
    failed_csv = tmp_path / "failed.csv"
    exported = bulkops(
        instance, "export", trial, "--state", "Failed", "--mode", "data", "-o", str(failed_csv)
    )
    assert exported.returncode == 0, exported.stderr
    assert [row.number for row in read_export(failed_csv)] == [2, 3]

    # Bob gets a valid address, Cy another invalid one: Cy is refused, Bob fixed and retried.
    edited = failed_csv.read_text().replace("bob-at-example", "bob@example.com")
    failed_csv.write_text(edited.replace("cy-at-example", "cy-still-wrong"))
    first = bulkops(instance, "fix", trial, str(failed_csv))

    assert first.returncode == 2, first.stdout + first.stderr
    assert "row 3 refused" in first.stderr and "cy-still-wrong" in first.stderr
    assert "1 rows fixed, 1 refused" in first.stdout and "Retry: 1 rows submitted" in first.stdout
    wait_terminal(instance, trial)
    errors = bulkops(instance, "errors", trial)
    assert [line.split("\t")[0] for line in errors.stdout.splitlines()[1:]] == ["3"]
    rows = bulkops(instance, "rows", trial)
    fixed = {line.split("\t")[0]: line.split("\t")[-1] for line in rows.stdout.splitlines()[1:]}
    assert fixed == {"1": "false", "2": "true", "3": "false", "4": "false"}

    # Cy corrected in the same file: Bob no longer fails and is left alone.
    failed_csv.write_text(edited.replace("cy-at-example", "cy@example.com"))
    second = bulkops(instance, "fix", trial, str(failed_csv), "--json")

    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert report["fixed"] == [3] and report["skipped"] == [2] and report["refused"] == []
    wait_terminal(instance, trial)

    # Run for real from the dry run: no file, same metadata, fixed rows applied.
    run = bulkops(instance, "submit", "--from", trial, "--wait", "--poll-interval", "0.1")
    real = run.stdout.splitlines()[0]

    assert run.returncode == 3, run.stderr  # Dee fails at processing this time
    with Client(instance) as client:
        detail = client.get_bulk(real)
        trial_detail = client.get_bulk(trial)
        failures = list(client.iter_errors(real))
        done = [row.row_number for row in client.iter_rows(real, state="Completed")]
    assert trial_detail.dry_run and trial_detail.status.value == "Completed"
    assert not detail.dry_run and str(detail.source_operation_id) == trial
    assert detail.metadata == json.loads(META)
    assert detail.operation_name == "import-users"
    assert [(row.row_number, row.error_type) for row in failures] == [(4, "Processing")]
    assert done == [1, 2, 3]


def test_submit_a_workbook_sheet_and_a_gzip_file(instance: str, tmp_path: Path) -> None:
    import gzip

    import openpyxl

    book = openpyxl.Workbook()
    first = book.active
    assert first is not None
    first.title = "Notes"
    first.append(["nothing to import here"])
    people = book.create_sheet("People")
    people.append(["name", "email", "age"])
    people.append(["Ada", "ada@example.com", 36])
    people.append(["Bob", "bob-at-example", 41])
    workbook = tmp_path / "users.xlsx"
    book.save(workbook)
    packed = tmp_path / "users.csv.gz"
    packed.write_bytes(gzip.compress(USERS.encode()))
    submit = [
        "submit",
        "-o",
        "import-users",
        "--metadata",
        META,
        "--wait",
        "--poll-interval",
        "0.1",
    ]

    sheet = bulkops(instance, *submit, str(workbook), "--sheet", "People", "--dry-run")
    unknown = bulkops(instance, *submit, str(workbook), "--sheet", "Staff")
    compressed = bulkops(instance, *submit, str(packed))

    assert sheet.returncode == 3, sheet.stderr  # Bob's address fails validation
    with Client(instance) as client:
        detail = client.get_bulk(sheet.stdout.splitlines()[0])
        assert detail.dry_run and (detail.total_rows, detail.error_count) == (2, 1)
        assert client.get_bulk(compressed.stdout.splitlines()[0]).total_rows == 2
    assert unknown.returncode == 2 and "People" in unknown.stderr and "Notes" in unknown.stderr
    assert compressed.returncode == 0, compressed.stderr
