"""The settings of the hostile-input limits: defaults, and how they are read."""

from __future__ import annotations

import pytest

import bulkops as bo
from bulkops.runtime import file_limits


def test_the_expanded_size_defaults_to_twenty_times_the_upload_limit() -> None:
    settings = bo.Settings(database_url="memory://", files_url="memory://")
    assert settings.max_expanded_bytes is None
    assert settings.effective_max_expanded_bytes == 20 * settings.max_upload_bytes
    assert settings.max_file_rows == 0 and settings.tenant_max_rows_per_day is None
    assert settings.export_escape_formulas is True
    limits = file_limits(settings)
    assert (limits.expanded_bytes, limits.rows) == (20 * settings.max_upload_bytes, 0)


def test_the_limits_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BULKOPS_MAX_EXPANDED_BYTES", "0")
    monkeypatch.setenv("BULKOPS_MAX_FILE_ROWS", "500")
    monkeypatch.setenv("BULKOPS_TENANT_MAX_ROWS_PER_DAY", "10000")
    monkeypatch.setenv("BULKOPS_EXPORT_ESCAPE_FORMULAS", "false")
    settings = bo.Settings(database_url="memory://", files_url="memory://")
    assert settings.effective_max_expanded_bytes == 0  # 0: no limit
    assert settings.max_file_rows == 500 and settings.tenant_max_rows_per_day == 10_000
    assert settings.export_escape_formulas is False


@pytest.mark.parametrize(
    "field", ["max_expanded_bytes", "max_file_rows", "tenant_max_rows_per_day"]
)
def test_negative_limits_are_refused(field: str) -> None:
    with pytest.raises(ValueError):
        bo.Settings(database_url="memory://", files_url="memory://", **{field: -1})
