"""``memory.consolidate`` → the day's log becomes marks, the file is archived, and marks
that have faded wither.

The payload names one ``date`` (default: yesterday in the configured zone), or ``through``
a date: every day up to it that still has a live file or an unmerged claim. The nightly
rhythm sends ``through: yesterday``, so late lines for a day archived earlier, which start
a new live file, are consolidated by the next night's run.

Each day is claimed first (see :meth:`DailyLog.claim`): the marks come from exactly the
lines claimed, and a line appended meanwhile waits in the next live file, never archived
unread. Every step can be repeated after a crash without duplicating anything: a claim left
behind is found again with the same lines at the same positions; mark ids are derived from
the day, the lines and the subject; merging is resumable; the wither sweep is idempotent.
Evidence line numbers are the lines' final positions in the archive (offset by what the
archive already held), so a mark's evidence always points at an existing line.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from functools import partial
from typing import ClassVar
from zoneinfo import ZoneInfo

import anyio.to_thread
import structlog
from pydantic import model_validator

from daemon.bus import DeliveryContext, Receptor
from daemon.core.records import Mark, derived_id
from daemon.core.signal import Signal
from daemon.core.strength import withers
from daemon.core.subjects import normalize_subject
from daemon.files.daily import DailyLog
from daemon.files.fs import RefusedFile
from daemon.store import Store, Tx
from receptors.common import Day, Payload, parse_payload
from receptors.extractors import Extraction, Extractor

log = structlog.get_logger("cambium.consolidation")


class Consolidate(Payload):
    date: Day | None = None
    through: Day | None = None

    @model_validator(mode="after")
    def _one_way_to_name_days(self) -> Consolidate:
        if self.date is not None and self.through is not None:
            raise ValueError("give date (one day) or through (every day up to it), not both")
        return self


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
        if payload.through is not None:
            days = await anyio.to_thread.run_sync(self.daily.unconsolidated_days, payload.through)
        else:
            days = [payload.date or default_day(signal.emitted_at, self.zone)]
        refused: list[RefusedFile] = []
        for day in days:
            try:
                await self._consolidate(signal, day)
            except RefusedFile as exc:
                if len(days) == 1:
                    raise
                # One planted symlink must not stop every other day's consolidation; the
                # delivery still fails below, so the refusal stays visible.
                log.error("day not consolidated", day=day.isoformat(), error=str(exc))
                refused.append(exc)
        if refused:
            raise RefusedFile(0, f"{len(refused)} day(s) refused; first: {refused[0]}")
        withered = await delivery.commit(
            lambda tx: wither_sweep(tx, signal.workspace_id, delivery.now())
        )
        if withered:
            log.info("withered", marks=len(withered))

    async def _consolidate(self, signal: Signal, day: date) -> None:
        """Claim, extract, store the marks, merge; once more if the first claim was one an
        interrupted run left (the live file may have grown since). A leftover claim is
        always extracted again before it is merged: the crash may have come before its
        marks were stored (their ids make a repeat harmless)."""
        while (claim := await anyio.to_thread.run_sync(self.daily.claim, day)) is not None:
            extractions = await self.extractor.extract(day, claim.lines)
            marks = [m for e in extractions if (m := self._mark(signal, day, claim.offset, e))]
            # Durable before the lines move: the marks are the day's memory from now on.
            await self.store.write(partial(_insert_marks, marks))
            log.info("consolidated", day=day.isoformat(), lines=len(claim.lines), marks=len(marks))
            await anyio.to_thread.run_sync(self.daily.merge, day)
            if not claim.leftover:
                return

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


def _insert_marks(marks: list[Mark], tx: Tx) -> None:
    tx.marks.insert(marks)


def wither_sweep(tx: Tx, workspace: str, now: datetime) -> list[str]:
    """Active marks whose current strength fell below the threshold become withered."""
    scored = tx.marks.score(workspace, "", ("active",), now)
    fading = [s.mark_id for s in scored if withers(s.value)]
    tx.marks.set_state(fading, "withered", now)
    return fading
