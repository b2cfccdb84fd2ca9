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

A mark (or reinforcement) from a day's line is dated by that day, not by the night it was
consolidated: :func:`evidence_instant`, the day's noon in the configured zone. A line
carries no time of its own, and noon is the middle of the day it was written on (off by
half a day at most, where the day's start would be off by a whole one); a day that is not
over yet is dated no later than the consolidation was asked for.

The extractor sees the subjects the memory already uses, so its subjects converge. An
extraction that nearly copies a mark that still stands (active, withered or promoted) under
the same subject (the same fact on another day, or twice on one day) reinforces that mark
instead of adding one; the reinforcement's id is derived like a mark's, so a retry does not
reinforce twice. What the extractor found is kept in the delivery's checkpoint, so a retry
after a crash writes the same marks even if a model would answer differently the second
time. The extractor returns the whole claim or fails, and everything it yields is written
in one transaction: never a partial consolidation.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, time, timedelta
from functools import partial
from typing import ClassVar
from zoneinfo import ZoneInfo

import anyio.to_thread
import structlog

from daemon.bus import DeliveryContext, Receptor
from daemon.core import signal_types
from daemon.core.clock import to_utc
from daemon.core.likeness import DEFAULT_SIMILARITY, is_near_copy
from daemon.core.records import Mark, Reinforcement, derived_id
from daemon.core.signal import Signal
from daemon.core.strength import withers
from daemon.core.subjects import normalize_subject
from daemon.files.daily import DailyLog
from daemon.fs import RefusedFile
from daemon.schema.payloads import Consolidate
from daemon.store import Store, Tx
from receptors.common import parse_payload
from receptors.extractors import Extraction, Extractor, unread_note
from receptors.near_copies import Wanted, near_copies

log = structlog.get_logger("cambium.consolidation")


def default_day(emitted_at: datetime, zone: ZoneInfo) -> date:
    """Yesterday, in the consolidation time zone, as seen when the signal was emitted."""
    return emitted_at.astimezone(zone).date() - timedelta(days=1)


EVIDENCE_TIME_OF_DAY = time(12)  # a day's line is dated at the day's noon (see above)


def evidence_instant(day: date, zone: ZoneInfo, emitted_at: datetime) -> datetime:
    """When a line of ``day`` was written, as well as the day says it: its noon in
    ``zone`` (never a time a clock change skips), and no later than ``emitted_at``."""
    noon = datetime.combine(day, EVIDENCE_TIME_OF_DAY, tzinfo=zone)
    return min(to_utc(noon), emitted_at)


class ConsolidationReceptor(Receptor):
    key: ClassVar[str] = "consolidation"
    binds: ClassVar[frozenset[str]] = frozenset({signal_types.CONSOLIDATE})

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
        payload = parse_payload(Consolidate, signal)
        if payload.through is not None:
            days = await anyio.to_thread.run_sync(self.daily.unconsolidated_days, payload.through)
        else:
            days = [payload.date or default_day(signal.emitted_at, self.zone)]
        refused: list[RefusedFile] = []
        for day in days:
            try:
                await self._consolidate(signal, delivery, day)
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

    async def _consolidate(self, signal: Signal, delivery: DeliveryContext, day: date) -> None:
        """Claim, extract, store the marks, merge; once more if the first claim was one an
        interrupted run left (the live file may have grown since). A leftover claim is
        always extracted again before it is merged: the crash may have come before its
        marks were stored (their ids make a repeat harmless)."""
        while (claim := await anyio.to_thread.run_sync(self.daily.claim, day)) is not None:
            extractions = await self._extract(signal, delivery, day, claim.lines, claim.offset)
            marks = [m for e in extractions if (m := self._mark(signal, day, claim.offset, e))]
            # Durable before the lines move: the marks are the day's memory from now on.
            new, reinforced = await self.store.write(partial(self._remember, signal, marks))
            note = unread_note(self.extractor, claim.lines)
            log.info(
                "consolidated",
                day=day.isoformat(),
                lines=len(claim.lines),
                marks=new,
                reinforced=reinforced,
                **({"note": note} if note else {}),
            )
            await anyio.to_thread.run_sync(self.daily.merge, day)
            if not claim.leftover:
                return

    async def _extract(
        self,
        signal: Signal,
        delivery: DeliveryContext,
        day: date,
        lines: list[str],
        offset: int,
    ) -> list[Extraction]:
        """A claim's extractions, asked for once per delivery: a retry after a crash reuses
        what the interrupted attempt found (a model may word a fact differently the second
        time, which would make a second mark). Asked again if the claim has grown since."""
        key = f"extracted {day.isoformat()} after line {offset}"
        saved = (delivery.checkpoint or {}).get(key)
        if saved is not None and saved["lines"] == len(lines):
            return [Extraction.from_json(item) for item in saved["items"]]
        subjects = await self.store.read(lambda tx: tx.marks.subjects(signal.workspace_id))
        found = await self.extractor.extract(day, lines, subjects)
        items = [item.to_json() for item in found]
        await delivery.save_checkpoint(
            (delivery.checkpoint or {}) | {key: {"lines": len(lines), "items": items}}
        )
        return found

    def _remember(self, signal: Signal, found: Sequence[Mark], tx: Tx) -> tuple[int, int]:
        """Insert the day's marks, except those that nearly copy an older mark: those
        reinforce it. Returns how many of each."""
        stored = near_copies(
            tx,
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
        tx.marks.insert(new)  # first: a boost may be for a new mark
        tx.marks.reinforce(boosts)
        return len(new), len(boosts)

    def _same(self, earlier: Mark, mark: Mark) -> bool:
        return earlier.subject == mark.subject and is_near_copy(
            earlier.observation, mark.observation, self.similarity
        )

    def _reinforcement(self, signal: Signal, found: Mark, existing: Mark) -> Reinforcement:
        """``found`` (the mark this extraction would have made) reinforces ``existing``."""
        return Reinforcement.of(
            existing,
            signal,
            evidence=found.evidence,
            delta=self.reinforce_delta,
            id=derived_id("rf", found.id),
            at=found.first_observed_at,
        )

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
            provenance=found.provenance,
            at=evidence_instant(day, self.zone, signal.emitted_at),
        )


def wither_sweep(tx: Tx, workspace: str, now: datetime) -> list[str]:
    """Active marks whose current strength fell below the threshold become withered."""
    scored = tx.marks.score(workspace, "", ("active",), now)
    fading = [s.mark_id for s in scored if withers(s.value)]
    tx.marks.set_state(fading, "withered", now)
    return fading
