"""``escape_formula`` and ``unescape_formula``: safe cells, and a reversible escape."""

from __future__ import annotations

import pytest

from bulkops.wire import escape_formula, unescape_formula


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("=1+1", "'=1+1"),
        ("+cmd", "'+cmd"),
        ("-cmd", "'-cmd"),
        ("@SUM(1)", "'@SUM(1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-3", "-3"),
        ("+1.5", "+1.5"),
        ("-.5e3", "-.5e3"),
        ("-", "'-"),
        ("plain", "plain"),
        ("'plain", "'plain"),
        ("'=x", "''=x"),
        ("''=x", "'''=x"),
        ("'-3", "'-3"),
        ("", ""),
        (None, None),
        (-3, -3),
    ],
)
def test_escape_and_its_reverse(value: object, escaped: object) -> None:
    assert escape_formula(value) == escaped
    assert unescape_formula(escaped) == value


@pytest.mark.parametrize("text", ["'", "''", "'a", "x'=", "'\t", "'''", "=", "'+1"])
def test_every_text_survives_a_round_trip(text: str) -> None:
    assert unescape_formula(escape_formula(text)) == text
