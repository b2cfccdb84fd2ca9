"""What the receptors share: payload contracts as pydantic types, and derived ids.

Payloads are checked here before anything is written; a violation becomes a
:class:`~daemon.bus.PayloadError` naming the field, which makes the delivery dead.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)

from daemon.bus import PayloadError
from daemon.core.days import InvalidDay, parse_day
from daemon.core.errors import field_errors
from daemon.core.subjects import normalize_subject

M = TypeVar("M", bound=BaseModel)

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


class Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def parse_payload(model: type[M], payload: dict[str, Any]) -> M:
    """Validate a signal payload against a receptor's contract."""
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        errors = field_errors(exc.errors())
        first, rest = errors[0], errors[1:]
        more = f" (and {len(rest)} more: {', '.join(e.field for e in rest)})" if rest else ""
        raise PayloadError(first.field, first.message + more) from None
