"""Days: a daily file is named by a real calendar date, never by a path."""

from __future__ import annotations

import re
from datetime import date

_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class InvalidDay(ValueError):
    """Not a real calendar date written as YYYY-MM-DD."""


def parse_day(value: str) -> date:
    """A real calendar date written as YYYY-MM-DD, and nothing else (no path can pass)."""
    if _DAY.fullmatch(value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise InvalidDay(f"invalid day {value!r}: expected a real calendar date as YYYY-MM-DD")
