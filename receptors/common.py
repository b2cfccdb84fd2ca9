"""What the receptors share: checking a signal's payload against its contract
(:mod:`daemon.schema.payloads`) before anything is written; a violation becomes a
:class:`~daemon.bus.PayloadError` naming the field, which makes the delivery dead."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from daemon.bus import PayloadError
from daemon.core.errors import field_errors
from daemon.core.signal import Signal

M = TypeVar("M", bound=BaseModel)


def parse_payload(model: type[M], signal: Signal) -> M:
    """Validate a signal's payload against a receptor's contract (once: a payload the edge
    checked is not checked again)."""
    try:
        return signal.payload_as(model)
    except ValidationError as exc:
        errors = field_errors(exc.errors())
        first, rest = errors[0], errors[1:]
        more = f" (and {len(rest)} more: {', '.join(e.field for e in rest)})" if rest else ""
        raise PayloadError(first.field, first.message + more) from None
