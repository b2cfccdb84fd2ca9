"""Time, injectable. Every component takes a ``Clock`` instead of reading the wall clock,
so tests move time by passing a function rather than sleeping."""

from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

Clock = Callable[[], datetime]

SECONDS_PER_DAY = 86_400.0


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_utc(value: datetime) -> datetime:
    """An aware instant in UTC; naive values are refused rather than guessed."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("naive datetime: a time zone is required")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 has no UTC instant
        raise ValueError("out of range: no such instant in UTC") from None


def iso(value: datetime) -> str:
    """ISO 8601 in UTC with a ``Z``, the one format instants leave the daemon in."""
    return to_utc(value).isoformat().replace("+00:00", "Z")


def known_zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; a ValueError saying what to give if zoneinfo does not
    know it."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {name!r}; use an IANA name such as Europe/Berlin"
        ) from None
