"""The signal: what other processes emit, and the rules it must pass before it is stored.

Validation happens once, here. Whatever passes is safe to store and deliver; whatever
fails is refused with errors that name the field, and nothing is stored.
"""

from __future__ import annotations

import builtins
import json
import math
import secrets
import time
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from daemon.core.clock import SECONDS_PER_DAY, to_utc, utcnow
from daemon.core.errors import FieldError, describe, field_errors
from daemon.core.json_text import json_bytes

SIGNAL_TYPE_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]*$"
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]*$"

MAX_PAYLOAD_BYTES = 256 * 1024
MAX_PAYLOAD_DEPTH = 32
MAX_PAYLOAD_STRING = 64 * 1024
MAX_LIST_ITEMS = 10_000
MAX_AFFINITY = 64
MAX_FUTURE_SKEW = timedelta(minutes=5)
# Days are computed from emitted_at (yesterday, in any zone): keep far from datetime's edges.
EARLIEST_EMITTED_AT = datetime(1900, 1, 1, tzinfo=UTC)
DEFAULT_DECAY_SECONDS = 14 * SECONDS_PER_DAY
DEFAULT_WORKSPACE = "default"
TOO_LARGE = "too_large"  # the pydantic error type of a payload over MAX_PAYLOAD_BYTES

M = TypeVar("M", bound=BaseModel)

ShortName = Annotated[str, Field(min_length=1, max_length=128, pattern=NAME_PATTERN)]


def checked_instant(value: datetime, info: ValidationInfo) -> datetime:
    """An instant a signal says (when it was emitted, when its evidence was seen), in UTC:
    not from the future beyond a clock's skew (``now`` from the validation context, or the
    clock), nor from before the days the daemon can count."""
    now = (info.context or {}).get("now") or utcnow()
    value = to_utc(value)
    if value > now + MAX_FUTURE_SKEW:
        raise ValueError("must not be more than 5 minutes in the future")
    if value < EARLIEST_EMITTED_AT:
        raise ValueError(f"must not be before {EARLIEST_EMITTED_AT.date().isoformat()}")
    return value


def _no_nul(text: str) -> str:
    # PostgreSQL cannot store NUL in text: refused here, so every store sees the same signals.
    if "\x00" in text:
        raise ValueError("must not contain NUL characters (\\u0000)")
    return text


Tag = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_no_nul)]


def new_signal_id() -> str:
    """32 hex digits laid out as a UUIDv7: the millisecond first, then 74 random bits.

    Ids made in time order land next to each other in the log's unique id index, so a
    commit of many signals touches one or two index pages instead of one page per signal
    (each page written is more for the commit's fsync to carry)."""
    value = (time.time_ns() // 1_000_000) << 80 | secrets.randbits(80)
    value = value & ~(0xF << 76) | 0x7 << 76  # version 7
    value = value & ~(0x3 << 62) | 0x2 << 62  # RFC 9562 variant
    return f"{value:032x}"


class Signal(BaseModel):
    """A validated signal. Construct it with :meth:`parse` from untrusted input.

    ``workspace_id`` is always set: an emitter that leaves it out gets ``default`` here, and
    the bus replaces that with its configured workspace (``model_fields_set`` tells them
    apart).
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        allow_inf_nan=False,
        str_strip_whitespace=False,
    )

    # No "/" in ids: they travel in URL paths (/v1/signals/{id}).
    id: Annotated[str, Field(min_length=1, max_length=128, pattern=ID_PATTERN)] = Field(
        default_factory=new_signal_id
    )
    type: str = Field(max_length=128, pattern=SIGNAL_TYPE_PATTERN)
    signal_class: ShortName = Field("knowledge", alias="class")
    source_layer: ShortName = "agent"
    source_id: ShortName
    workspace_id: ShortName = DEFAULT_WORKSPACE
    intensity: float = Field(0.7, ge=0.0, le=1.0, strict=True)
    decay_rate: float = Field(
        DEFAULT_DECAY_SECONDS, ge=0.0, le=100 * 365 * SECONDS_PER_DAY, strict=True
    )
    cascade_potential: bool = Field(False, strict=True)
    payload: dict[str, Any] = Field(default_factory=dict)
    affinity: list[Tag] = Field(default_factory=list, max_length=MAX_AFFINITY)
    emitted_at: AwareDatetime = Field(default_factory=utcnow)
    idempotency_key: (
        Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_no_nul)] | None
    ) = None
    correlation_id: ShortName | None = None
    causation_id: ShortName | None = None

    # The payload as its contract read it (see payload_as): checked at the edge, it is not
    # checked again by the receptor that applies the signal.
    _contract: BaseModel | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _defaults_from_context(cls, data: Any, info: ValidationInfo) -> Any:
        # An injected clock (validation context "now") also decides the default instant, and
        # the bus's workspace (context "workspace") the default workspace: set here, the
        # signal is never copied to change it.
        context = info.context
        if not context or not isinstance(data, dict):
            return data
        defaults = {
            key: context[name]
            for key, name in (("emitted_at", "now"), ("workspace_id", "workspace"))
            if key not in data and context.get(name) is not None
        }
        return {**data, **defaults} if defaults else data

    @field_validator("payload")
    @classmethod
    def _payload_within_limits(cls, payload: dict[str, Any]) -> dict[str, Any]:
        _check_json_value(payload, depth=0)
        size = len(json_bytes(payload))  # as the store keeps it
        if size > MAX_PAYLOAD_BYTES:
            raise PydanticCustomError(
                TOO_LARGE,
                "serialized payload is {size} bytes; the limit is {limit}",
                {"size": size, "limit": MAX_PAYLOAD_BYTES},
            )
        return payload

    @field_validator("emitted_at")
    @classmethod
    def _not_in_the_future(cls, value: datetime, info: ValidationInfo) -> datetime:
        return checked_instant(value, info)

    @classmethod
    def parse(
        cls, data: Any, *, now: datetime | None = None, workspace: str | None = None
    ) -> Signal:
        """Validate untrusted input (a dict or JSON text); raise :class:`SignalRejected`.
        ``now`` and ``workspace`` stand in for the emitter's ``emitted_at`` and
        ``workspace_id`` where it gave none."""
        context = {"now": now, "workspace": workspace} if now or workspace else None
        if isinstance(data, str | bytes):
            data = _json_object(data)
        try:
            return cls.model_validate(data, context=context)
        except ValidationError as exc:
            details = exc.errors()
            rejected = SignalTooLarge if any(e["type"] == TOO_LARGE for e in details) else None
            raise (rejected or SignalRejected)(field_errors(details)) from None

    def payload_as(self, contract: builtins.type[M]) -> M:
        """The payload validated by ``contract`` (raising pydantic's ValidationError), once:
        a second call for the same contract returns the first one's model."""
        found = self._contract
        if isinstance(found, contract) and builtins.type(found) is contract:
            return found
        model = contract.model_validate(self.payload)
        self._contract = model
        return model

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class SignalRejected(ValueError):
    """A signal failed validation; ``errors`` names each field and the rule it broke."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__(describe(errors))


class SignalTooLarge(SignalRejected):
    """The signal's payload is over the size limit (HTTP answers 413, not 422)."""


def _json_object(text: str | bytes) -> Any:
    """JSON text as Python values; a repeated key is refused (JSON parsers disagree about
    which one wins, so the emitter cannot know what was stored)."""

    def no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(pairs)
        if len(found) < len(pairs):  # (rare: only then are the repeats looked for)
            keys = [key for key, _ in pairs]
            raise _Repeated(sorted({key for key in keys if keys.count(key) > 1}))
        return found

    try:
        return json.loads(text, object_pairs_hook=no_repeats)
    except _Repeated as exc:
        message = f"repeated key {', '.join(map(repr, exc.keys))} in a JSON object"
    except RecursionError:
        message = "JSON nested too deeply"
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        message = f"not valid JSON: {exc}"
    raise SignalRejected([FieldError(field="body", message=message)])


class _Repeated(Exception):
    def __init__(self, keys: list[str]) -> None:
        self.keys = keys


def _check_json_value(value: Any, depth: int) -> None:
    """Bound nesting, string and list sizes; refuse what JSON cannot carry (NaN, non-str keys)."""
    if depth > MAX_PAYLOAD_DEPTH:
        raise ValueError(f"nesting deeper than {MAX_PAYLOAD_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError("object keys must be strings")
            _no_nul(key)
            _check_json_value(item, depth + 1)
    elif isinstance(value, list):
        if len(value) > MAX_LIST_ITEMS:
            raise ValueError(f"a list holds more than {MAX_LIST_ITEMS} items")
        for item in value:
            _check_json_value(item, depth + 1)
    elif isinstance(value, str):
        if len(value) > MAX_PAYLOAD_STRING:
            raise ValueError(f"a string is longer than {MAX_PAYLOAD_STRING} characters")
        _no_nul(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("numbers must be finite")
    elif value is not None and not isinstance(value, bool | int):
        raise ValueError(f"{type(value).__name__} is not a JSON value")
