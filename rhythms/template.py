"""Rhythm templates: the YAML files that say when a rhythm fires and what signal it emits,
and the slot arithmetic the scheduler relies on.

A template looks like this (the bundled ``templates/consolidation.yaml``)::

    name: consolidation          # lowercase: ^[a-z][a-z0-9_.-]*$
    period: daily                # daily | weekly | cron
    phase: "03:00"               # when in the period; see below
    # timezone: Europe/Berlin    # IANA zone; default (and the bundled rhythm's): the config's
    signal:
      type: memory.consolidate
      class: lifecycle           # default knowledge
      intensity: 1.0             # default 0.7
      decay_rate: 0              # seconds; default 14 days
      payload: {through: "{{yesterday}}"}
    catchup: fire_once           # fire_once (default) | skip

``phase`` carries the whole "when", whatever the period:

- ``daily``: a local time of day, ``"HH:MM"`` or ``"HH:MM:SS"``;
- ``weekly``: a day abbreviation and a time, ``"sun 18:00"``;
- ``cron``: a 5-field crontab expression, ``"*/15 8-18 * * mon-fri"``. The day-of-week field
  takes names only: APScheduler 3 numbers weekdays from Monday = 0 where crontab has
  Sunday = 0, so a number there would silently fire on the wrong day.

A *slot* is one instant at which a rhythm is due, always in UTC here. Local times follow
APScheduler's ``CronTrigger`` in the rhythm's zone: a time that does not exist on the night
clocks go forward fires once, shifted by the gap (02:30 becomes 03:30). A time that occurs
twice on the night clocks go back fires only the first time for daily and weekly rhythms and
for cron rhythms that name their hours (as cron does); cron rhythms whose hour field is a
wildcard fire in both passes, since each pass is real elapsed time.

Payload strings may contain ``{{today}}`` and ``{{yesterday}}``: the slot's date and the day
before, ``YYYY-MM-DD`` in the rhythm's zone (the slot's, not the moment it actually fires).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, Self
from zoneinfo import ZoneInfo

import yaml
from apscheduler.triggers.cron import CronTrigger
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from daemon.core.clock import iso, to_utc
from daemon.core.errors import describe, field_errors
from daemon.core.signal import SIGNAL_TYPE_PATTERN, Signal, SignalRejected
from daemon.core.time_zone import TimeZoneName

TEMPLATES_DIR = Path(__file__).with_name("templates")

NAME_PATTERN = r"^[a-z][a-z0-9_.-]*$"
# Room for the "rhythm:" prefix inside a signal's 128-character source_id.
MAX_NAME = 100
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
PLACEHOLDER = re.compile(r"\{\{\s*(.*?)\s*\}\}")
_TIME_OF_DAY = re.compile(r"^(\d{2}):(\d{2})(?::(\d{2}))?$")
# Any fixed instant does to check that a phase fires at all: the calendar repeats.
_PROBE_INSTANT = datetime(2000, 1, 1, tzinfo=UTC)
_RESOLUTION = timedelta(microseconds=1)


class RhythmTemplateError(ValueError):
    """A template file is unreadable or breaks a rule; the message names file, field and rule."""


class RhythmSignal(BaseModel):
    """The ``signal`` section. Unset fields take the :class:`Signal` defaults, and the
    Signal's own rules check the values, so a template can never produce a signal the bus
    would refuse."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    # Checked here as well as by the Signal, so the usual mistake is reported as signal.type.
    type: str = Field(pattern=SIGNAL_TYPE_PATTERN)
    signal_class: str | None = Field(None, alias="class")
    intensity: float | None = Field(None, strict=True)
    decay_rate: float | None = Field(None, strict=True)
    payload: dict[str, Any] = Field(default_factory=dict)

    @field_validator("payload")
    @classmethod
    def _known_placeholders(cls, payload: dict[str, Any]) -> dict[str, Any]:
        _render(payload, _PROBE_INSTANT.date())  # raises on an unknown placeholder
        return payload

    @model_validator(mode="after")
    def _makes_a_valid_signal(self) -> Self:
        try:
            self.build(_render(self.payload, _PROBE_INSTANT.date()), source_id="rhythm:probe")
        except SignalRejected as exc:
            raise ValueError(describe(exc.errors)) from None
        return self

    def build(
        self, payload: dict[str, Any], *, now: datetime | None = None, **fields: Any
    ) -> Signal:
        """The signal these settings describe, with a rendered ``payload`` and the emitter's
        ``fields`` (source, idempotency key, ...). Raises :class:`SignalRejected`."""
        settings = self.model_dump(by_alias=True, exclude_none=True)
        return Signal.parse({**settings, "payload": payload, **fields}, now=now)


class RhythmTemplate(BaseModel):
    """One validated rhythm, from :func:`load_template` (or ``model_validate``; not
    ``model_copy(update=...)``, which skips validation and would keep the old trigger)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(max_length=MAX_NAME, pattern=NAME_PATTERN)
    period: Literal["daily", "weekly", "cron"]
    phase: str
    timezone: TimeZoneName
    signal: RhythmSignal
    catchup: Literal["fire_once", "skip"] = "fire_once"

    _trigger: Any = PrivateAttr()
    _fires_once_per_wall_time: bool = PrivateAttr()

    @field_validator("phase")
    @classmethod
    def _phase_fits_period(cls, phase: str, info: ValidationInfo) -> str:
        period = info.data.get("period")
        if period is None:  # the period itself is invalid and reported as such
            return phase
        fields = _cron_fields(period, phase)
        try:
            trigger = CronTrigger(**fields, timezone=UTC)
        except ValueError as exc:
            raise ValueError(f"{period} phase {phase!r}: {exc}") from None
        if trigger.get_next_fire_time(None, _PROBE_INSTANT) is None:
            raise ValueError(f"{period} phase {phase!r} never fires: no date matches it")
        return phase

    def model_post_init(self, context: Any) -> None:
        fields = _cron_fields(self.period, self.phase)
        self._trigger = CronTrigger(**fields, timezone=self.zone)
        self._fires_once_per_wall_time = not fields["hour"].startswith("*")

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def render_payload(self, slot: datetime) -> dict[str, Any]:
        """The payload with its placeholders filled in for ``slot``."""
        return _render(self.signal.payload, to_utc(slot).astimezone(self.zone).date())

    def signal_for(self, slot: datetime, now: datetime) -> Signal:
        """The signal that fires ``slot``, emitted at ``now``. Its idempotency key names the
        slot, so however often the slot is fired, the bus stores it once."""
        return self.signal.build(
            self.render_payload(slot),
            now=now,
            source_id=f"rhythm:{self.name}",
            source_layer="rhythm",
            emitted_at=now,
            idempotency_key=f"rhythm:{self.name}:{iso(slot)}",
        )


def next_slot(template: RhythmTemplate, after: datetime) -> datetime:
    """The rhythm's first slot strictly after ``after``, in UTC."""
    candidate = to_utc(after)
    while True:
        # CronTrigger returns the first fire time at or after its "now".
        fire_time: datetime | None = template._trigger.get_next_fire_time(
            None, candidate + _RESOLUTION
        )
        if fire_time is None:  # the phase was checked to fire; only the year 9999 ends it
            raise ValueError(f"rhythm {template.name!r} has no slot after {iso(after)}")
        candidate = to_utc(fire_time)
        if not (template._fires_once_per_wall_time and _second_pass(candidate, template.zone)):
            return candidate


def latest_slot(template: RhythmTemplate, after: datetime, now: datetime) -> datetime | None:
    """The rhythm's latest slot ``s`` with ``after < s <= now``, or None."""
    # Look back over a doubling window rather than walking forward from ``after``: a
    # daemon down for a year must not step through every slot of a per-minute rhythm.
    window = timedelta(hours=1)
    while True:
        start = max(after, now - window)
        latest = None
        slot = next_slot(template, start)
        while slot <= now:
            latest = slot
            slot = next_slot(template, slot)
        if latest is not None or start == after:
            return latest
        window *= 2


def load_template(path: Path, default_timezone: str) -> RhythmTemplate:
    """Read and validate one template file; ``default_timezone`` serves when it names none."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RhythmTemplateError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise RhythmTemplateError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise RhythmTemplateError(f"{path}: a rhythm template must be a mapping of fields")
    try:
        return RhythmTemplate.model_validate({"timezone": default_timezone, **data})
    except ValidationError as exc:
        problems = describe(field_errors(exc.errors()))
        raise RhythmTemplateError(f"{path}: {problems}") from None


def bundled_templates(default_timezone: str) -> list[RhythmTemplate]:
    """The templates shipped in ``rhythms/templates``, in file name order. They name no time
    zone of their own: ``default_timezone`` (the config's) is theirs."""
    return [load_template(path, default_timezone) for path in sorted(TEMPLATES_DIR.glob("*.yaml"))]


def _cron_fields(period: str, phase: str) -> dict[str, str]:
    """CronTrigger arguments for a phase; ValueError saying what the period expects."""
    if period == "cron":
        fields = phase.split()
        if len(fields) != 5:
            raise ValueError(
                f"cron phase {phase!r} must have 5 fields: minute hour day month day-of-week"
            )
        if any(character.isdigit() for character in fields[4]):
            raise ValueError(
                f"cron phase {phase!r}: name the days of the week (sun, mon-fri, ...) instead "
                "of numbering them; APScheduler 3 counts from Monday = 0, crontab from Sunday"
            )
        return dict(zip(("minute", "hour", "day", "month", "day_of_week"), fields, strict=True))
    if period == "weekly":
        day, _, time_of_day = phase.partition(" ")
        if day.lower() not in WEEKDAYS:
            raise ValueError(
                f"weekly phase {phase!r} must be a day ({', '.join(WEEKDAYS)}) and a time, "
                'like "sun 18:00"'
            )
        return {"day_of_week": day.lower(), **_time_fields(period, time_of_day.strip())}
    return _time_fields(period, phase)


def _time_fields(period: str, text: str) -> dict[str, str]:
    match = _TIME_OF_DAY.match(text)
    if match:
        hour, minute, second = (int(part or 0) for part in match.groups())
        if hour <= 23 and minute <= 59 and second <= 59:
            return {"hour": str(hour), "minute": str(minute), "second": str(second)}
    raise ValueError(
        f"{period} phase needs a time of day HH:MM or HH:MM:SS from 00:00 to 23:59:59, not {text!r}"
    )


def _second_pass(instant: datetime, zone: ZoneInfo) -> bool:
    """Whether ``instant``'s wall time in ``zone`` is the repeat after clocks went back."""
    local = instant.astimezone(zone)
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


def _render(payload: dict[str, Any], day: date) -> dict[str, Any]:
    """``payload`` with the placeholders in its string values (at any depth) filled in for
    ``day``; ValueError naming an unknown placeholder."""
    dates = {"today": day.isoformat(), "yesterday": (day - timedelta(days=1)).isoformat()}

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in dates:
            raise ValueError(
                f"unknown placeholder {match.group(0)}; known: {{{{today}}}}, {{{{yesterday}}}}"
            )
        return dates[name]

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return PLACEHOLDER.sub(fill, value)
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        return value

    rendered: dict[str, Any] = walk(payload)
    return rendered
