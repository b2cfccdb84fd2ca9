"""``memory.daily_note`` → one line appended to that day's log (default: today in the
configured time zone, as seen when the signal was emitted).

An append and the bus's done-mark cannot share a transaction, so the receptor first saves a
checkpoint (how many lines the file had); a redelivery that finds its line already after
that point does not append it again.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, ClassVar
from zoneinfo import ZoneInfo

import anyio.to_thread
from pydantic import AfterValidator

from daemon.bus import DeliveryContext, Receptor
from daemon.core.signal import Signal
from daemon.files.daily import DailyLog
from receptors.common import Day, Payload, Text, parse_payload


def _one_line(value: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError("must be a single line")
    return value


class DailyNote(Payload):
    text: Annotated[Text, AfterValidator(_one_line)]
    date: Day | None = None


class DailyNoteReceptor(Receptor):
    key: ClassVar[str] = "daily"
    binds: ClassVar[frozenset[str]] = frozenset({"memory.daily_note"})

    def __init__(self, daily: DailyLog, *, zone: ZoneInfo) -> None:
        self.daily = daily
        self.zone = zone

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        payload = parse_payload(DailyNote, signal.payload)
        day = payload.date or signal.emitted_at.astimezone(self.zone).date()
        if delivery.checkpoint is None:
            before = await anyio.to_thread.run_sync(self._line_count, day)
            await delivery.save_checkpoint({"lines_before": before})
        elif await anyio.to_thread.run_sync(
            self._already_appended, day, payload.text, int(delivery.checkpoint["lines_before"])
        ):
            return
        await anyio.to_thread.run_sync(self.daily.append, day, payload.text)

    def _line_count(self, day: date) -> int:
        return len(self.daily.read(day) or ())

    def _already_appended(self, day: date, text: str, lines_before: int) -> bool:
        live = self.daily.read(day)
        if live is not None:
            return text in live[lines_before:]
        # The live file was archived since the interrupted attempt: look there.
        return text in (self.daily.read(day, archived=True) or ())
