"""``memory.consolidate`` → the day's log becomes marks, the file is archived, and marks
that have faded wither.

Every step can be repeated after a crash without duplicating anything: mark ids are derived
from the day, the lines and the subject; archiving is itself resumable (see
:meth:`DailyLog.archive`); the wither sweep is idempotent. Evidence line numbers are the
lines' final positions in the archive (offset by what the archive already held), so a
mark's evidence always points at an existing line.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import ClassVar
from zoneinfo import ZoneInfo

import anyio.to_thread
import structlog

from daemon.bus import DeliveryContext, Receptor
from daemon.core.records import Mark, derived_id
from daemon.core.signal import Signal
from daemon.core.strength import withers
from daemon.core.subjects import normalize_subject
from daemon.files.daily import DailyLog
from daemon.store import Store, Tx
from receptors.common import Day, Payload, parse_payload
from receptors.extractors import Extraction, Extractor

log = structlog.get_logger("cambium.consolidation")


class Consolidate(Payload):
    date: Day | None = None


def default_day(emitted_at: datetime, zone: ZoneInfo) -> date:
    """Yesterday, in the consolidation time zone, as seen when the signal was emitted."""
    return emitted_at.astimezone(zone).date() - timedelta(days=1)


class ConsolidationReceptor(Receptor):
    key: ClassVar[str] = "consolidation"
    binds: ClassVar[frozenset[str]] = frozenset({"memory.consolidate"})

    def __init__(
        self,
        store: Store,
        daily: DailyLog,
        extractor: Extractor,
        *,
        zone: ZoneInfo,
        decay_days: float = 14.0,
    ) -> None:
        self.store = store
        self.daily = daily
        self.extractor = extractor
        self.zone = zone
        self.decay_days = decay_days

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        payload = parse_payload(Consolidate, signal.payload)
        day = payload.date or default_day(signal.emitted_at, self.zone)
        lines = await anyio.to_thread.run_sync(self.daily.read, day)
        if lines is not None:
            offset = await anyio.to_thread.run_sync(self.daily.archived_line_count, day)
            extractions = await self.extractor.extract(day, lines)
            marks = [m for e in extractions if (m := self._mark(signal, day, offset, e))]
            # Durable before the file moves: the marks are the day's memory from now on.
            await self.store.write(lambda tx: tx.marks.insert(marks))
            log.info("consolidated", day=day.isoformat(), lines=len(lines), marks=len(marks))
        # Also when the live file is gone: this finishes an archive a crash interrupted.
        await anyio.to_thread.run_sync(self.daily.archive, day)
        withered = await delivery.commit(
            lambda tx: wither_sweep(tx, signal.workspace_id, delivery.now())
        )
        if withered:
            log.info("withered", marks=len(withered))

    def _mark(self, signal: Signal, day: date, offset: int, found: Extraction) -> Mark | None:
        subject = normalize_subject(found.subject)
        start, end = found.line_range
        if not subject or not found.observation.strip() or not 1 <= start <= end:
            log.warning("extraction skipped", day=day.isoformat(), extraction=repr(found))
            return None
        line_range = [start + offset, end + offset]
        return Mark.observed(
            signal,
            id=derived_id(
                "mk",
                signal.workspace_id,
                day.isoformat(),
                f"{line_range[0]}-{line_range[1]}",
                subject,
            ),
            subject=subject,
            observation=found.observation.strip(),
            evidence={
                "daily_file": f"{day.isoformat()}.md",
                "line_range": line_range,
                "signal_ids": [signal.id],
            },
            initial_strength=found.initial_strength,
            half_life_days=self.decay_days,
            affinity=found.affinity,
            substrate_refs=found.substrate_refs,
        )


def wither_sweep(tx: Tx, workspace: str, now: datetime) -> list[str]:
    """Active marks whose current strength fell below the threshold become withered."""
    scored = tx.marks.score(workspace, "", ("active",), now)
    fading = [s.mark_id for s in scored if withers(s.value)]
    tx.marks.set_state(fading, "withered", now)
    return fading
