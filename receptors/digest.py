"""``memory.seed_digest`` (the weekly rhythm): overdue pending seeds wither, then the day's
log gets how many seeds wait for review, the oldest three with their age, and how many
withered in the week up to the signal.

The withering is one store transaction (idempotent: a withered seed stays withered); the
lines are appended after it. An append and the bus's done-mark cannot share a transaction,
so the receptor saves a checkpoint (how many lines the file had and the lines it will
write); a redelivery appends only the lines not already there."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

import anyio.to_thread

from daemon.bus import DeliveryContext, Receptor
from daemon.core import signal_types
from daemon.core.clock import SECONDS_PER_DAY
from daemon.core.records import Seed
from daemon.core.signal import Signal
from daemon.files.daily import DailyLog
from daemon.schema.payloads import SeedDigest
from daemon.services.review import wither
from daemon.store import Store, Tx
from receptors.common import parse_payload

OLDEST_SHOWN = 3
WEEK = timedelta(days=7)
EXCERPT_CHARS = 80


class DigestReceptor(Receptor):
    key: ClassVar[str] = "digest"
    binds: ClassVar[frozenset[str]] = frozenset({signal_types.SEED_DIGEST})

    def __init__(
        self, store: Store, daily: DailyLog, *, zone: ZoneInfo, wither_days: float = 30
    ) -> None:
        self.store = store
        self.daily = daily
        self.zone = zone
        self.wither_days = wither_days

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        payload = parse_payload(SeedDigest, signal)
        day = payload.date or signal.emitted_at.astimezone(self.zone).date()
        if delivery.checkpoint is None:
            lines = await self.store.write(lambda tx: self._digest(tx, signal))
            before = await anyio.to_thread.run_sync(self._line_count, day)
            await delivery.save_checkpoint({"lines_before": before, "lines": lines})
        checkpoint: dict[str, Any] = delivery.checkpoint or {}
        await anyio.to_thread.run_sync(
            self._append_missing, day, int(checkpoint["lines_before"]), list(checkpoint["lines"])
        )

    def _digest(self, tx: Tx, signal: Signal) -> list[str]:
        now, workspace = signal.emitted_at, signal.workspace_id
        wither(tx, workspace, now, self.wither_days)
        withered = tx.seeds.withered_between(workspace, now - WEEK, now)
        pending, oldest = tx.seeds.oldest_pending(workspace, OLDEST_SHOWN)
        return digest_lines(pending, oldest, withered, now)

    def _line_count(self, day: date) -> int:
        return len(self.daily.read(day) or ())

    def _append_missing(self, day: date, lines_before: int, lines: list[str]) -> None:
        live = self.daily.read(day)
        if live is None:  # archived since the interrupted attempt, or never written
            live = self.daily.read(day, archived=True) or []
            lines_before = 0
        written = live[lines_before:]
        done = 0
        while done < len(lines) and lines[done] in written:
            done += 1
        for line in lines[done:]:
            self.daily.append(day, line)


def digest_lines(pending: int, oldest: list[Seed], withered: int, now: datetime) -> list[str]:
    """The digest as daily-log lines."""
    lines = [
        f"seed digest: {pending} pending, {withered} withered this week"
        + (" — review with `cambium memory seeds --state pending`" if pending else "")
    ]
    for seed in oldest:
        age = (now - seed.planted_at).total_seconds() / SECONDS_PER_DAY
        change = " ".join(seed.proposed_change.split())
        if len(change) > EXCERPT_CHARS:
            change = change[: EXCERPT_CHARS - 1] + "…"
        lines.append(f"seed digest: {seed.id} ({seed.subject}, {age:.0f} days old): {change}")
    return lines
