"""Settings come from BULKOPS_* variables and reject unsafe values with clear errors."""

from __future__ import annotations

import pydantic
import pytest

from bulkops import Settings


def test_defaults_match_the_documented_table() -> None:
    settings = Settings()
    assert settings.database_url == "sqlite:///bulkops-data/bulkops.db"
    assert settings.files_url == "file://./bulkops-data/files"
    assert (settings.host, settings.port, settings.role) == ("127.0.0.1", 8000, "combined")
    assert settings.worker_count == 4 and settings.max_row_concurrency == 1
    assert settings.max_retry_attempts == 10 and settings.orphan_age == 300
    assert settings.max_upload_bytes == 104857600 and settings.event_store == "sql"
    assert settings.poll_interval_for("combined") is None
    assert settings.poll_interval_for("worker") == 2.0


def test_environment_variables_and_comma_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BULKOPS_OPERATIONS", "a.ops, b.py")
    monkeypatch.setenv("BULKOPS_CORS_ORIGINS", "https://a.example,https://b.example")
    monkeypatch.setenv("BULKOPS_PENDING_POLL_INTERVAL", "0")
    monkeypatch.setenv("BULKOPS_WORKER_COUNT", "7")
    settings = Settings()
    assert settings.operations == ["a.ops", "b.py"]
    assert settings.cors_origins == ["https://a.example", "https://b.example"]
    assert settings.worker_count == 7
    assert settings.poll_interval_for("worker") is None  # 0 turns the poller off


def test_wildcard_cors_origin_is_rejected() -> None:
    with pytest.raises(pydantic.ValidationError, match=r"'\*' is not allowed"):
        Settings(cors_origins=["*"])


@pytest.mark.parametrize(
    ("field", "value"),
    [("worker_count", 0), ("max_row_concurrency", 0), ("port", 70000), ("role", "boss")],
)
def test_invalid_values_are_rejected(field: str, value: object) -> None:
    with pytest.raises(pydantic.ValidationError):
        Settings(**{field: value})


def test_a_short_orphan_age_alone_shortens_the_heartbeat_instead_of_refusing() -> None:
    settings = Settings(orphan_age=2, enable_orphaned_step_recovery=True)
    assert settings.effective_heartbeat_interval == pytest.approx(2 / 3)
    short = Settings(abandon_after=3)
    assert short.effective_heartbeat_interval == 1
    assert Settings().effective_heartbeat_interval == 5
    assert Settings(heartbeat_interval=1.5).effective_heartbeat_interval == 1.5


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"heartbeat_interval": 30}, "shorter than BULKOPS_ABANDON_AFTER"),
        (
            {"heartbeat_interval": 5, "orphan_age": 4, "enable_orphaned_step_recovery": True},
            "shorter than BULKOPS_ORPHAN_AGE",
        ),
    ],
)
def test_values_the_user_set_that_contradict_each_other_are_refused(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        Settings(**values)
