"""``memory.mark_corrected``, ``memory.mark_retracted`` and ``memory.forget``: a person
governing their memory. The rules live in :mod:`daemon.services.governance`; this receptor
checks payloads and applies them in the bus's transaction.

A forget erases every copy the daemon holds, in steps that a retry after a crash repeats
harmlessly (each finds less to do), in an order that loses no copy's address:

1. the archived lines the marks cite are read, and every other copy of them and of the
   marks' text is erased from the store (payloads, seeds, checkpoints, errors);
2. those lines in the daemon-managed archive are replaced by a marker (line numbers stay);
3. the marks are erased and the tombstone written, with the delivery;
4. the marks' vectors are deleted (from the store and from the file recall searches), then
   the store is scrubbed (on SQLite: the write-ahead log checkpointed and truncated).

The person's live daily files are not touched: the API lists the lines that still
mention what was forgotten."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, TypeVar

import anyio.to_thread

from daemon.bus import DeliveryContext, PayloadError, Receptor
from daemon.core import signal_types
from daemon.core.forgetting import forgotten_marker
from daemon.core.records import derived_id
from daemon.core.signal import Signal
from daemon.files.daily import DailyLog
from daemon.schema.payloads import Forget, MarkCorrected, MarkRetracted
from daemon.services.errors import Refused
from daemon.services.governance import (
    ForgetTarget,
    Forgetting,
    archived_lines,
    correct,
    erase_copies,
    forget,
    retract,
    to_forget,
)
from daemon.services.mark_search import MarkSearch
from daemon.store import Store, Tx
from receptors.common import parse_payload

T = TypeVar("T")


class GovernanceReceptor(Receptor):
    key: ClassVar[str] = "governance"
    binds: ClassVar[frozenset[str]] = frozenset(
        {signal_types.MARK_CORRECTED, signal_types.MARK_RETRACTED, signal_types.FORGET}
    )

    def __init__(
        self, store: Store, daily: DailyLog | None = None, mark_search: MarkSearch | None = None
    ) -> None:
        self.store = store
        self.daily = daily
        self.mark_search = mark_search

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        if signal.type != signal_types.FORGET:
            await delivery.commit(lambda tx: self.apply(tx, signal))
            return
        asked = parse_payload(Forget, signal.payload)
        target = ForgetTarget(subject=asked.subject, mark_id=asked.mark_id)
        planned = await self.store.read(
            lambda tx: _refusing(lambda: to_forget(tx, signal.workspace_id, target, asked.reason))
        )
        cited = planned.cited()
        lines: tuple[str, ...] = ()
        if self.daily is not None:
            lines = tuple(await anyio.to_thread.run_sync(archived_lines, self.daily, cited))
        marker = forgotten_marker(derived_id("tb", signal.id))
        lines = tuple(line for line in lines if line.strip() and line != marker)
        planned = Forgetting(target, planned.marks, planned.evidence, lines)
        await self.store.write(lambda tx: erase_copies(tx, signal, planned))
        if self.daily is not None:
            await anyio.to_thread.run_sync(self.daily.redact_archive, cited, marker)
        await delivery.commit(
            lambda tx: _refusing(lambda: forget(tx, signal, target, asked.reason, lines))
        )
        if self.mark_search is not None:  # before the scrub, which clears the log of them
            await anyio.to_thread.run_sync(self.mark_search.erase_outdated)
        await anyio.to_thread.run_sync(self.store.scrub)

    def apply(self, tx: Tx, signal: Signal) -> None:
        def applied() -> object:
            if signal.type == signal_types.MARK_CORRECTED:
                corrected = parse_payload(MarkCorrected, signal.payload)
                return correct(tx, signal, corrected.mark_id, corrected.text, corrected.reason)
            retracted = parse_payload(MarkRetracted, signal.payload)
            return retract(tx, signal, retracted.mark_id, retracted.reason)

        _refusing(applied)


def _refusing(step: Callable[[], T]) -> T:
    """``step()``, a rule's refusal made the payload's error (the delivery is dead)."""
    try:
        return step()
    except Refused as exc:
        raise PayloadError(exc.field, str(exc)) from None
