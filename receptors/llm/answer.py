"""What a model must answer when asked for a day's facts, and how an answer is checked.

The schema goes to the server as ``response_format`` (servers that honour it constrain the
model to it); pydantic then validates whatever came back, because not every server does.
Models like to wrap JSON in a code fence or a sentence; the JSON object is taken out of
either (:func:`daemon.llm.client.json_text`). Every ``line_range`` must lie within the lines
the model was shown.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)

from daemon.core.subjects import normalize_subject
from daemon.llm.client import InvalidAnswer, json_text

_SUBJECT = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*$")


def _subject(value: str) -> str:
    subject = normalize_subject(value)
    if not _SUBJECT.match(subject):
        raise ValueError("must be a lowercase dot path like user.food.lunch")
    return subject


class Fact(BaseModel):
    model_config = ConfigDict(extra="ignore")

    subject: Annotated[str, StringConstraints(max_length=200), AfterValidator(_subject)]
    observation: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=1000)
    ]
    line_range: tuple[int, int]
    affinity: list[Annotated[str, StringConstraints(max_length=64)]] = Field(
        default_factory=list, max_length=16
    )


class Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    facts: list[Fact] = Field(max_length=500)


# Written out (not generated) so that it meets the strict subset servers accept: every
# property required, no extra properties.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["facts"],
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["subject", "observation", "line_range", "affinity"],
                "properties": {
                    "subject": {"type": "string"},
                    "observation": {"type": "string"},
                    "line_range": {
                        "type": "array",
                        "items": {"type": "integer"},
                        "minItems": 2,
                        "maxItems": 2,
                    },
                    "affinity": {"type": "array", "items": {"type": "string"}},
                },
            },
        }
    },
}


def parse_answer(answer: str, first_line: int, last_line: int) -> list[Fact]:
    """The facts in ``answer``, each citing lines within ``first_line..last_line``."""
    try:
        parsed = Answer.model_validate_json(json_text(answer))
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in error['loc']) or 'answer'}: {error['msg']}"
            for error in exc.errors(include_url=False)[:5]
        ]
        raise InvalidAnswer("; ".join(problems)) from None
    for index, fact in enumerate(parsed.facts):
        start, end = fact.line_range
        if not first_line <= start <= end <= last_line:
            raise InvalidAnswer(
                f"facts.{index}.line_range: [{start}, {end}] is not within the lines shown, "
                f"{first_line} to {last_line} (and start must not be after end)"
            )
    return parsed.facts
