"""``escape_formula`` and ``unescape_formula``: safe cells, and a reversible escape."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bulkops.wire import escape_cells, escape_formula, unescape_formula


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


CELL = st.one_of(
    st.none(),
    st.integers(),
    st.text(alphabet=st.sampled_from("'=+-@\t\r.e1a "), max_size=6),
    st.text(max_size=6),
)


@given(st.lists(CELL, max_size=8))
def test_a_rows_cells_are_escaped_as_each_cell_is(cells: list[object]) -> None:
    assert list(escape_cells(cells)) == [escape_formula(cell) for cell in cells]


def test_a_row_with_nothing_to_escape_is_the_row_itself() -> None:
    row = ["12", "Ada", None, 3, "ada@example.com"]
    assert escape_cells(row) is row
