"""The priority of an operation: the ``priority`` form field of create."""

from __future__ import annotations

from bulkops.errors import BadRequest

LOWEST_PRIORITY = -10
HIGHEST_PRIORITY = 10


def parse_priority(value: str | int | None) -> int:
    """The priority a create asked for: an integer from -10 to 10, 0 when absent or blank.

    Raises:
        BadRequest: the value is not an integer, or lies outside -10..10.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return 0
    if isinstance(value, bool):
        raise BadRequest(f"priority must be an integer, not {value!r}")
    if isinstance(value, int):
        number = value
    else:
        text = value.strip()
        digits = text[1:] if text[:1] in "+-" else text
        if not digits.isascii() or not digits.isdigit():
            raise BadRequest(f"priority must be an integer from -10 to 10, not {value!r}")
        number = int(text)
    if not LOWEST_PRIORITY <= number <= HIGHEST_PRIORITY:
        raise BadRequest(
            f"priority must be from {LOWEST_PRIORITY} to {HIGHEST_PRIORITY}, not {number}"
        )
    return number
