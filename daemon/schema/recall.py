"""The recall query: what the API's ``/v1/recall`` and ``/v1/context`` take, what the
client sends and what the MCP tools ``recall`` and ``context`` accept. One definition; its
answer is :class:`daemon.schema.answers.Recall`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from typing import Any, Literal, Self
from zoneinfo import ZoneInfo

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from daemon.core.clock import to_utc
from daemon.core.signal import EARLIEST_EMITTED_AT, ShortName
from daemon.core.strength import WITHER_THRESHOLD
from daemon.schema.fields import Provenance

Layer = Literal["substrate", "marks", "daily", "compost"]
LAYERS: tuple[Layer, ...] = ("substrate", "marks", "daily", "compost")
MAX_HORIZON_DAYS = 36_500
_RELATIVE = re.compile(r"^(\d+)d$")
_FLAG = TypeAdapter(bool)


class RecallQuery(BaseModel):
    """What to recall. Invalid values raise a ValidationError naming the field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    about: str = Field("", max_length=1024)  # empty: everything
    layers: tuple[Layer, ...] = LAYERS
    horizon: str | None = None  # 1d, 7d, 30d, all, an ISO date or an ISO instant
    min_strength: float = Field(WITHER_THRESHOLD, ge=0.0, le=1.0)
    limit: int = Field(10, ge=1, le=1000)
    include_withered: bool = False
    # Also superseded, retracted and forgotten marks, with their links and end.
    include_history: bool = False
    workspace: ShortName | None = None  # default: the daemon's configured workspace
    provenance: tuple[Provenance, ...] | None = None  # only marks of these provenances
    summary: bool = False  # fill the summary (with an LLM configured; see services.summary)

    @model_validator(mode="before")
    @classmethod
    def _withered_means_any_strength(cls, data: Any) -> Any:
        # Withered marks are below the default minimum by definition: asking for them (or
        # for the whole history) without naming a minimum means asking for every strength.
        if isinstance(data, dict) and data.get("min_strength") is None:
            data = {key: value for key, value in data.items() if key != "min_strength"}
            if _asked(data.get("include_withered")) or _asked(data.get("include_history")):
                data["min_strength"] = 0.0
        return data

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> Self:
        """The query from URL parameters; those of no field are left to the route."""
        return cls.model_validate(
            {name: params[name] for name in cls.model_fields if name in params}
        )

    def to_params(self) -> dict[str, str]:
        """The URL parameters :meth:`from_params` reads back as this query."""
        params = {"about": self.about}
        for name, value in self.model_dump(exclude_defaults=True).items():
            if isinstance(value, tuple):
                params[name] = ",".join(value)
            elif isinstance(value, bool):
                params[name] = "true" if value else "false"
            else:
                params[name] = str(value)
        return params

    @field_validator("layers", "provenance", mode="before")
    @classmethod
    def _split_comma_lists(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return LAYERS if info.field_name == "layers" else None
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        return tuple(dict.fromkeys(value)) if isinstance(value, list | tuple) else value

    @field_validator("horizon")
    @classmethod
    def _known_horizon(cls, value: str | None) -> str | None:
        if value is not None:
            horizon_start(value, datetime(2000, 1, 1, tzinfo=ZoneInfo("UTC")), ZoneInfo("UTC"))
        return value


def _asked(flag: Any) -> bool:
    """A flag's value as the field will read it (``"false"`` from a URL is false); a bad
    one counts as not asked, and the field's own check names it."""
    try:
        return _FLAG.validate_python(flag)
    except ValidationError:
        return False


# The latest a horizon starts: a day short of the calendar's end, room for any zone's offset.
LATEST_HORIZON = datetime(9999, 12, 30, tzinfo=ZoneInfo("UTC"))


def horizon_start(horizon: str, now: datetime, zone: ZoneInfo) -> datetime | None:
    """The earliest instant inside ``horizon``; None for ``all``. A day or instant before
    anything is dated (1900) counts from then, one in the calendar's last days from the
    first of them: at its edges (0001-01-01 in Berlin, 9999-12-31T23:59:59Z) a zone's
    offset would leave no instant to compare with."""
    if horizon == "all":
        return None
    relative = _RELATIVE.match(horizon)
    if relative:
        days = int(relative[1])
        if not 1 <= days <= MAX_HORIZON_DAYS:
            raise ValueError(f"must be 1d to {MAX_HORIZON_DAYS}d, or all")
        return now - timedelta(days=days)
    try:
        if len(horizon) == 10:
            day = date.fromisoformat(horizon)
            day = min(max(day, EARLIEST_EMITTED_AT.date()), LATEST_HORIZON.date())
            return datetime(day.year, day.month, day.day, tzinfo=zone)
        instant = datetime.fromisoformat(horizon.replace("Z", "+00:00"))
    except ValueError:
        instant = None
    if instant is None or instant.tzinfo is None:
        raise ValueError(
            "must be 1d, 7d, 30d (any Nd), all, an ISO date or an ISO instant with zone"
        )
    return min(max(to_utc(instant), EARLIEST_EMITTED_AT), LATEST_HORIZON)


# A context block's length bounds: the smallest fits the envelope with the longest ``about``
# shown (see :mod:`daemon.services.context`).
MIN_CHARS = 200
MAX_CHARS = 100_000
DEFAULT_CHARS = 4000


class ContextQuery(RecallQuery):
    """What to recall, as a prompt-ready block no longer than ``max_chars``."""

    max_chars: int = Field(
        DEFAULT_CHARS,
        ge=MIN_CHARS,
        le=MAX_CHARS,
        description="The block is never longer than this many characters.",
    )
