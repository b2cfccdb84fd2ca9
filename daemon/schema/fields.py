"""The field types of the signal payload contracts (a subject, a day, a bounded text, …),
and :class:`Payload`, the base every contract extends: strict, frozen, no unknown field."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
)

from daemon.core.days import InvalidDay, parse_day
from daemon.core.signal import checked_instant
from daemon.core.subjects import normalize_subject

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=16_384)]
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]


def _subject(value: str) -> str:
    subject = normalize_subject(value)
    if not subject:
        raise ValueError("must be a non-empty dot path")
    return subject


def _day(value: object) -> date:
    if not isinstance(value, str):
        raise ValueError("must be a date string, YYYY-MM-DD")
    try:
        return parse_day(value)
    except InvalidDay as exc:
        raise ValueError(str(exc)) from None


def _day_file(value: str) -> str:
    if not value.endswith(".md"):
        raise ValueError("must name a daily file, YYYY-MM-DD.md")
    _day(value.removesuffix(".md"))
    return value


def _safe_path(value: str) -> str:
    if "\x00" in value or ".." in value.replace("\\", "/").split("/"):
        raise ValueError("must not contain '..' segments or NUL bytes")
    return value


def _relative(value: str) -> str:
    if value.startswith("/"):
        raise ValueError("must be relative (it is matched against the end of a substrate path)")
    return value


def _markdown(value: str) -> str:
    if not value.endswith(".md"):
        raise ValueError("must be a path ending in .md")
    return value


def _line_range(value: list[int]) -> list[int]:
    if len(value) != 2 or not 1 <= value[0] <= value[1]:
        raise ValueError("must be [start, end] with 1 <= start <= end")
    return value


Subject = Annotated[str, StringConstraints(max_length=512), AfterValidator(_subject)]
Day = Annotated[date, BeforeValidator(_day)]
DayFile = Annotated[str, AfterValidator(_day_file)]
LineRange = Annotated[list[int], AfterValidator(_line_range)]
SubstrateRef = Annotated[Name, AfterValidator(_safe_path), AfterValidator(_relative)]
TargetFile = Annotated[
    str,
    StringConstraints(min_length=1, max_length=1024),
    AfterValidator(_safe_path),
    AfterValidator(_markdown),
]
Tags = Annotated[list[Name], Field(max_length=64)]
# Who vouches for a mark: a person stated it, an agent observed it, a model inferred it.
Provenance = Literal["stated", "observed", "inferred"]


def _instant_text(value: object) -> object:
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 instant with a time zone, as a string")
    return value


# When a piece of evidence was seen or said: ISO 8601 text with a time zone (strict payloads
# take no strings for instants, so this one is parsed), in UTC.
EvidenceInstant = Annotated[
    AwareDatetime,
    Field(strict=False),
    BeforeValidator(_instant_text),
    AfterValidator(checked_instant),
]


class Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
