"""Field errors: the one shape every refusal takes, whatever refused (a signal, a payload,
a config file, a rhythm template, a query), and the one way it is written as text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class FieldError:
    """``field`` (a dotted path such as ``payload.subject``) broke the rule ``message``."""

    field: str
    message: str

    def model_dump(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


def field_errors(
    details: Iterable[Mapping[str, Any]], *, skip_location: int = 0, whole: str = "body"
) -> list[FieldError]:
    """Pydantic's error details (``exc.errors()``) as field errors. ``skip_location`` drops
    leading location parts (FastAPI prefixes ``query``/``body``); an error about the input
    as a whole is named ``whole``."""
    errors = []
    for error in details:
        location = error["loc"][skip_location:] or error["loc"]
        field = ".".join(str(part) for part in location) or whole
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        errors.append(FieldError(field=field, message=message))
    return errors


def describe(errors: Iterable[FieldError]) -> str:
    """``field: rule; field: rule`` — how field errors read in messages and logs."""
    return "; ".join(f"{e.field}: {e.message}" if e.field else e.message for e in errors)
