"""``memory.consolidate`` → the day's log becomes marks, the file is archived, and marks
that have faded wither.

Every step can be repeated after a crash without duplicating anything: mark ids are derived
from the day, the lines and the subject; archiving is itself resumable (see
:meth:`DailyLog.archive`); the wither sweep is idempotent. Evidence line numbers are the
lines' final positions in the archive (offset by what the archive already held), so a
mark's evidence always points at an existing line.

The extractor sees the subjects the memory already uses, so its subjects converge. An
extraction that nearly copies an active or withered mark under the same subject (the same
fact on another day, or twice on one day) reinforces that mark instead of adding one; the
reinforcement's id is derived like a mark's, so a retry does not reinforce twice. What the
extractor found is kept in the delivery's checkpoint, so a retry after a crash writes the
same marks even if a model would answer differently the second time. The extractor returns
the whole day or fails, and everything the day yields is written in one transaction: never
a partial consolidation.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import ClassVar
from zoneinfo import ZoneInfo

import anyio.to_thread
import structlog
from sqlalchemy.engine import Connection

from daemon.bus import DeliveryContext, Receptor
from daemon.core.likeness import DEFAULT_SIMILARITY, is_near_copy
from daemon.core.records import Mark, Reinforcement
from daemon.core.signal import Signal
from daemon.core.subjects import normalize_subject
from daemon.files.daily import DailyLog
from daemon.store import Store
from daemon.store import marks as mark_store
from receptors.common import Day, Payload, derived_id, parse_payload
from receptors.extractors import Extraction, Extractor
from receptors.near_copies import Wanted, known_subjects, near_copies

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
        reinforce_delta: float = 0.2,
        similarity: float = DEFAULT_SIMILARITY,
    ) -> None:
        self.store = store
        self.daily = daily
        self.extractor = extractor
        self.zone = zone
        self.decay_days = decay_days
        self.reinforce_delta = reinforce_delta
        self.similarity = similarity

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        payload = parse_payload(Consolidate, signal.payload)
        day = payload.date or default_day(signal.emitted_at, self.zone)
        lines = await anyio.to_thread.run_sync(self.daily.read, day)
        if lines is not None:
            offset = await anyio.to_thread.run_sync(self.daily.archived_line_count, day)
            extractions = await self._extract(signal, delivery, day, lines)
            marks = [m for e in extractions if (m := self._mark(signal, day, offset, e))]
            # Durable before the file moves: the marks are the day's memory from now on.
            new, reinforced = await self.store.write(
                lambda connection: self._remember(connection, signal, marks)
            )
            log.info(
                "consolidated",
                day=day.isoformat(),
                lines=len(lines),
                marks=new,
                reinforced=reinforced,
            )
        # Also when the live file is gone: this finishes an archive a crash interrupted.
        await anyio.to_thread.run_sync(self.daily.archive, day)
        workspace = signal.workspace_id or "default"
        withered = await delivery.commit(
            lambda connection: mark_store.wither_sweep(connection, workspace, delivery.now())
        )
        if withered:
            log.info("withered", marks=len(withered))

    async def _extract(
        self, signal: Signal, delivery: DeliveryContext, day: date, lines: list[str]
    ) -> list[Extraction]:
        """The day's extractions, asked for once per delivery: a retry after a crash reuses
        what the interrupted attempt found (a model may word a fact differently the second
        time, which would make a second mark). Asked again if the day has grown since."""
        key = f"extracted {day.isoformat()}"
        saved = (delivery.checkpoint or {}).get(key)
        if saved is not None and saved["lines"] == len(lines):
            return [Extraction.from_json(item) for item in saved["items"]]
        workspace = signal.workspace_id or "default"
        subjects = await self.store.read(lambda c: known_subjects(c, workspace))
        found = await self.extractor.extract(day, lines, subjects)
        items = [item.to_json() for item in found]
        await delivery.save_checkpoint(
            (delivery.checkpoint or {}) | {key: {"lines": len(lines), "items": items}}
        )
        return found

    def _remember(
        self, connection: Connection, signal: Signal, found: Sequence[Mark]
    ) -> tuple[int, int]:
        """Insert the day's marks, except those that nearly copy an older mark: those
        reinforce it. Returns how many of each."""
        stored = near_copies(
            connection,
            [Wanted(m.workspace_id, m.subject, m.observation) for m in found],
            self.similarity,
        )
        new: list[Mark] = []
        boosts: list[tuple[Mark, Reinforcement]] = []
        for mark, existing in zip(found, stored, strict=True):
            if existing is None or existing.id == mark.id:  # none, or ours from a retry
                existing = next((m for m in new if self._same(m, mark)), None)
            if existing is None:
                new.append(mark)
            else:
                boosts.append((existing, self._reinforcement(signal, mark, existing)))
        mark_store.insert_marks(connection, new)  # first: a boost may be for a new mark
        mark_store.reinforce_many(connection, boosts)
        return len(new), len(boosts)

    def _same(self, earlier: Mark, mark: Mark) -> bool:
        return earlier.subject == mark.subject and is_near_copy(
            earlier.observation, mark.observation, self.similarity
        )

    def _reinforcement(self, signal: Signal, found: Mark, existing: Mark) -> Reinforcement:
        """``found`` (the mark this extraction would have made) reinforces ``existing``."""
        return Reinforcement(
            id=derived_id("rf", found.id),
            mark_id=existing.id,
            reinforced_at=signal.emitted_at,
            reinforced_by=signal.source_id,
            evidence=found.evidence,
            strength_delta=self.reinforce_delta,
        )

    def _mark(self, signal: Signal, day: date, offset: int, found: Extraction) -> Mark | None:
        subject = normalize_subject(found.subject)
        start, end = found.line_range
        if not subject or not found.observation.strip() or not 1 <= start <= end:
            log.warning("extraction skipped", day=day.isoformat(), extraction=repr(found))
            return None
        line_range = [start + offset, end + offset]
        return Mark(
            id=derived_id(
                "mk",
                signal.workspace_id or "default",
                day.isoformat(),
                f"{line_range[0]}-{line_range[1]}",
                subject,
            ),
            workspace_id=signal.workspace_id or "default",
            subject=subject,
            observation=found.observation.strip(),
            evidence={
                "daily_file": f"{day.isoformat()}.md",
                "line_range": line_range,
                "signal_ids": [signal.id],
            },
            initial_strength=min(1.0, max(0.0, found.initial_strength)),
            decay_rate=self.decay_days,
            observed_by=signal.source_id,
            first_observed_at=signal.emitted_at,
            last_reinforced_at=signal.emitted_at,
            reinforcement_count=0,
            affinity=list(found.affinity),
            substrate_refs=list(found.substrate_refs),
            state="active",
            provenance=found.provenance,
            created_at=signal.emitted_at,
            updated_at=signal.emitted_at,
        )
