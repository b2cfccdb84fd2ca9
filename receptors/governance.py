"""``memory.mark_corrected``, ``memory.mark_retracted`` and ``memory.forget``: a person
governing their memory. The rules live in :mod:`daemon.services.governance`; this receptor
checks payloads and applies them in the bus's transaction. After a forget it scrubs the
store (on SQLite: checkpoints and truncates the write-ahead log), so the erased text is gone
from the files on disk as well."""

from __future__ import annotations

from typing import ClassVar

import anyio.to_thread

from daemon.bus import DeliveryContext, PayloadError, Receptor
from daemon.core import signal_types
from daemon.core.signal import Signal
from daemon.schema.payloads import Forget, MarkCorrected, MarkRetracted
from daemon.services.errors import Refused
from daemon.services.governance import ForgetTarget, correct, forget, retract
from daemon.store import Store, Tx
from receptors.common import parse_payload


class GovernanceReceptor(Receptor):
    key: ClassVar[str] = "governance"
    binds: ClassVar[frozenset[str]] = frozenset(
        {signal_types.MARK_CORRECTED, signal_types.MARK_RETRACTED, signal_types.FORGET}
    )

    def __init__(self, store: Store) -> None:
        self.store = store

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        await delivery.commit(lambda tx: self.apply(tx, signal))
        if signal.type == signal_types.FORGET:
            await anyio.to_thread.run_sync(self.store.scrub)

    def apply(self, tx: Tx, signal: Signal) -> None:
        try:
            if signal.type == signal_types.MARK_CORRECTED:
                corrected = parse_payload(MarkCorrected, signal.payload)
                correct(tx, signal, corrected.mark_id, corrected.text, corrected.reason)
            elif signal.type == signal_types.MARK_RETRACTED:
                retracted = parse_payload(MarkRetracted, signal.payload)
                retract(tx, signal, retracted.mark_id, retracted.reason)
            else:
                asked = parse_payload(Forget, signal.payload)
                target = ForgetTarget(subject=asked.subject, mark_id=asked.mark_id)
                forget(tx, signal, target, asked.reason)
        except Refused as exc:
            raise PayloadError(exc.field, str(exc)) from None
