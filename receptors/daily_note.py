"""``memory.daily_note`` → one line appended to that day's log (default: today in the
configured time zone, as seen when the signal was emitted).

An append and the bus's done-mark cannot share a transaction, so the receptor first saves a
checkpoint: the day's position (how many lines it holds, archived, claimed by a
consolidation and live). A redelivery that finds its line after that point, wherever the
line has moved meanwhile, does not append it again; the look and the append are one step
under the daily log's lock.
"""

from __future__ import annotations

from functools import partial
from typing import ClassVar
from zoneinfo import ZoneInfo

import anyio.to_thread

from daemon.bus import DeliveryContext, Receptor
from daemon.core import signal_types
from daemon.core.signal import Signal
from daemon.files.daily import DailyLog
from daemon.schema.payloads import DailyNote
from receptors.common import parse_payload

# The checkpoint's key: the day's position before the first attempt.
CHECKPOINT = "day_position"


class DailyNoteReceptor(Receptor):
    key: ClassVar[str] = "daily"
    binds: ClassVar[frozenset[str]] = frozenset({signal_types.DAILY_NOTE})

    def __init__(self, daily: DailyLog, *, zone: ZoneInfo) -> None:
        self.daily = daily
        self.zone = zone

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        payload = parse_payload(DailyNote, signal)
        day = payload.date or signal.emitted_at.astimezone(self.zone).date()
        checkpoint = delivery.checkpoint or {}
        if CHECKPOINT in checkpoint:
            after: int | None = int(checkpoint[CHECKPOINT])
        else:
            after = None
            position = await anyio.to_thread.run_sync(self.daily.position, day)
            await delivery.save_checkpoint({CHECKPOINT: position})
        await anyio.to_thread.run_sync(
            partial(self.daily.append, day, payload.text, unless_after=after)
        )
