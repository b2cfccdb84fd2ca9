"""What the edge checks before it stores a signal, so nothing is stored that could only die:
its type must be one a receptor binds (unless the emitter asks for an unrouted signal), and
its payload must keep the contract of the receptor that applies it. (A seed's gates and the
marks it cites are checked by the API with the store at hand.) A stored signal's payload
cannot change, so a delivery refused for its payload would be dead for good."""

from __future__ import annotations

from collections.abc import Container, Mapping

from pydantic import ValidationError

from daemon.core import signal_types
from daemon.core.errors import FieldError, field_errors
from daemon.core.signal import Signal, SignalRejected
from daemon.schema.fields import Payload
from daemon.schema.payloads import (
    Consolidate,
    DailyNote,
    DeliveryDiscarded,
    Forget,
    MarkCorrected,
    MarkRetracted,
    Observation,
    SeedDigest,
    SeedPlanted,
    SeedReviewed,
    SeedReviewUndone,
)

CONTRACTS: Mapping[str, type[Payload]] = {
    signal_types.OBSERVATION: Observation,
    signal_types.DAILY_NOTE: DailyNote,
    signal_types.CONSOLIDATE: Consolidate,
    signal_types.SEED_DIGEST: SeedDigest,
    signal_types.SEED_PLANTED: SeedPlanted,
    signal_types.SEED_REVIEWED: SeedReviewed,
    signal_types.SEED_REVIEW_UNDONE: SeedReviewUndone,
    signal_types.MARK_CORRECTED: MarkCorrected,
    signal_types.MARK_RETRACTED: MarkRetracted,
    signal_types.FORGET: Forget,
    signal_types.DELIVERY_DISCARDED: DeliveryDiscarded,
}


def admitted(
    signal: Signal, *, routed: Container[str], allow_unrouted: bool = False
) -> Payload | None:
    """The signal's payload as the contract of the receptor that applies its type reads it
    (None for a type without one here; the receptor is handed the same, not checked again);
    raise :class:`SignalRejected` naming the field and the rule if it must not be stored.
    ``routed``: the types the daemon's receptors bind."""
    signal_type = signal.type
    if signal_type not in routed:
        if allow_unrouted:
            return None
        raise SignalRejected(
            [
                FieldError(
                    "type",
                    f"no receptor binds {signal_type}; to store it anyway (a record only, "
                    "or for a receptor yet to come) send allow_unrouted: true",
                )
            ]
        )
    contract = CONTRACTS.get(signal_type)
    if contract is None:
        return None
    try:
        return signal.payload_as(contract)
    except ValidationError as exc:
        raise SignalRejected(
            [
                FieldError(f"payload.{e.field}" if e.field else "payload", e.message)
                for e in field_errors(exc.errors(), whole="")
            ]
        ) from None
