"""``memory.mark_corrected``, ``memory.mark_retracted`` and ``memory.forget``: a person
governing their memory. The rules live in :mod:`daemon.services.governance`; this receptor
checks payloads and applies them in the bus's transaction. After a forget it scrubs the
store (on SQLite: checkpoints and truncates the write-ahead log), so the erased text is gone
from the files on disk as well."""

from __future__ import annotations

from typing import ClassVar

import anyio.to_thread
from pydantic import model_validator

from daemon.bus import DeliveryContext, PayloadError, Receptor
from daemon.core.signal import Signal
from daemon.services.errors import Refused
from daemon.services.governance import ForgetTarget, correct, forget, retract
from daemon.store import Store, Tx
from receptors.common import Name, Payload, Subject, Text, parse_payload


class MarkCorrected(Payload):
    mark_id: Name
    text: Text
    reason: Text


class MarkRetracted(Payload):
    mark_id: Name
    reason: Text


class Forget(Payload):
    subject: Subject | None = None
    mark_id: Name | None = None
    reason: Text

    @model_validator(mode="after")
    def _one_target(self) -> Forget:
        if (self.subject is None) == (self.mark_id is None):
            raise ValueError("needs exactly one of subject and mark_id")
        return self


class GovernanceReceptor(Receptor):
    key: ClassVar[str] = "governance"
    binds: ClassVar[frozenset[str]] = frozenset(
        {"memory.mark_corrected", "memory.mark_retracted", "memory.forget"}
    )

    def __init__(self, store: Store) -> None:
        self.store = store

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        await delivery.commit(lambda tx: self.apply(tx, signal))
        if signal.type == "memory.forget":
            await anyio.to_thread.run_sync(self.store.scrub)

    def apply(self, tx: Tx, signal: Signal) -> None:
        try:
            if signal.type == "memory.mark_corrected":
                corrected = parse_payload(MarkCorrected, signal.payload)
                correct(tx, signal, corrected.mark_id, corrected.text, corrected.reason)
            elif signal.type == "memory.mark_retracted":
                retracted = parse_payload(MarkRetracted, signal.payload)
                retract(tx, signal, retracted.mark_id, retracted.reason)
            else:
                asked = parse_payload(Forget, signal.payload)
                target = ForgetTarget(subject=asked.subject, mark_id=asked.mark_id)
                forget(tx, signal, target, asked.reason)
        except Refused as exc:
            raise PayloadError(exc.field, str(exc)) from None
