"""Time, injectable. Every component takes a ``Clock`` instead of reading the wall clock,
so tests move time by passing a function rather than sleeping."""

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_utc(value: datetime) -> datetime:
    """An aware instant in UTC; naive values are refused rather than guessed."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("naive datetime: a time zone is required")
    return value.astimezone(UTC)


def iso(value: datetime) -> str:
    """ISO 8601 in UTC with a ``Z``, the one format instants leave the daemon in."""
    return to_utc(value).isoformat().replace("+00:00", "Z")
