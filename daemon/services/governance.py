"""Correct, retract, forget: the rules for a person governing their memory, in one place.

The command path (:mod:`daemon.services.commands`) checks them before emitting a signal (to
refuse at once); the governance receptor applies them when the signal is delivered, inside
the bus's transaction, so each change is one atomic step recorded in the signal log.
Refusals are the domain's (:mod:`daemon.services.errors`), naming the field at fault.

- A correction supersedes a standing mark with a new one (same subject) linked both ways.
- A retraction ends a standing mark; its text stays, for the history.
- Forgetting erases every copy the store holds of the matching marks (a subject prefix, or
  one mark and its correction chain): their text, their reinforcements' evidence, every
  signal payload that carried it (observations, corrections, the daily notes of the lines
  they cite, the plantings of their seeds), the seeds based on them or under the subject,
  and redacts the deliveries' checkpoints and errors (a consolidation's saved extractions:
  for an inferred mark, the only other copy). It leaves a tombstone: who, when, why and
  how many, never the text. The signals themselves stay in the log (their count and order
  are the audit trail). A forget that matches nothing is refused. The files are the
  receptor's (:mod:`receptors.governance`): it redacts the archived lines the marks cite.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from daemon.core.days import InvalidDay, parse_day
from daemon.core.forgetting import (
    TEXT_CARRYING_TYPES,
    about,
    carries,
    erased_payload,
    forgotten_marker,
    redacted,
)
from daemon.core.likeness import drop_cached_words
from daemon.core.records import MARK_STATES, Mark, Tombstone, derived_id
from daemon.core.signal import Signal
from daemon.core.subjects import normalize_subject
from daemon.files.daily import DailyLog
from daemon.search.index import drop_cached_counts
from daemon.services.errors import Conflict, Invalid, NotFound
from daemon.store import Tx


def standing(tx: Tx, workspace: str, mark_id: str) -> Mark:
    """The mark, if it can be corrected or retracted now; else NotFound or Conflict."""
    mark = tx.marks.get(mark_id)
    if mark is None or mark.workspace_id != workspace:
        raise NotFound(f"no mark {mark_id}", field="mark_id")
    if not mark.current:
        successor = f" by {mark.superseded_by}" if mark.superseded_by else ""
        raise Conflict(f"mark {mark_id} is already {mark.state}{successor}", field="mark_id")
    return mark


def correct(tx: Tx, signal: Signal, mark_id: str, text: str, reason: str) -> Mark:
    """Supersede the mark with one saying ``text``; the new mark."""
    old = standing(tx, signal.workspace_id, mark_id)
    if text == old.observation:
        raise Invalid("is what the mark already says", field="text")
    new = old.corrected(signal, text=text, reason=reason)
    tx.marks.insert([new])
    if not tx.marks.end(old.id, "superseded", reason, signal.emitted_at, superseded_by=new.id):
        raise Conflict(f"mark {mark_id} was changed meanwhile", field="mark_id")
    return new


def retract(tx: Tx, signal: Signal, mark_id: str, reason: str) -> Mark:
    """End the mark; the mark as it was."""
    mark = standing(tx, signal.workspace_id, mark_id)
    if not tx.marks.end(mark.id, "retracted", reason, signal.emitted_at):
        raise Conflict(f"mark {mark_id} was changed meanwhile", field="mark_id")
    return mark


@dataclass(frozen=True)
class ForgetTarget:
    """A subject prefix, or one mark (with its correction chain)."""

    subject: str | None = None
    mark_id: str | None = None

    @property
    def kind(self) -> str:
        return "mark" if self.mark_id is not None else "subject"

    @property
    def name(self) -> str:
        return self.mark_id if self.mark_id is not None else self.subject or ""


@dataclass(frozen=True)
class Forgetting:
    """What a forget of ``target`` erases: its ``marks``, what their reinforcements cite,
    and (once the receptor has read them) the archived ``lines`` they cite."""

    target: ForgetTarget
    marks: list[Mark]
    evidence: list[dict[str, Any]] = field(default_factory=list)  # the marks' and boosts'
    lines: tuple[str, ...] = ()

    @property
    def ids(self) -> set[str]:
        return {m.id for m in self.marks}

    @property
    def subjects(self) -> set[str]:
        return {m.subject for m in self.marks}

    @property
    def texts(self) -> set[str]:
        """Every text whose copies must go: the marks' and the lines they cite."""
        return {m.observation for m in self.marks} | set(self.lines)

    @property
    def linked(self) -> set[str]:
        """The signals the evidence names."""
        return {i for e in self.evidence for i in e.get("signal_ids", [])}

    def cited(self) -> dict[date, set[int]]:
        """The archived lines the evidence cites, by day."""
        found: dict[date, set[int]] = {}
        for evidence in self.evidence:
            day, span = _day_of(evidence.get("daily_file")), evidence.get("line_range")
            if day is not None and isinstance(span, list) and len(span) == 2:
                start, end = span
                if isinstance(start, int) and isinstance(end, int):
                    found.setdefault(day, set()).update(range(start, end + 1))
        return found

    def names_seed(self, subject: Any, change: Any, based_on: Any) -> bool:
        """Whether a seed (or its planting) is one this forget erases: based on one of the
        marks, saying one of the texts, or (a subject forgotten) under that subject."""
        prefix = normalize_subject(self.target.subject or "")
        return (
            bool(self.ids & set(based_on if isinstance(based_on, list) else []))
            or carries(change, self.texts)
            or (bool(prefix) and isinstance(subject, str) and _under(subject, prefix))
        )


def _under(subject: str, prefix: str) -> bool:
    return subject == prefix or subject.startswith(prefix + ".")


def _day_of(daily_file: Any) -> date | None:
    if not isinstance(daily_file, str) or not daily_file.endswith(".md"):
        return None
    try:
        return parse_day(daily_file.removesuffix(".md"))
    except InvalidDay:
        return None


def to_forget(tx: Tx, workspace: str, target: ForgetTarget, reason: str = "") -> Forgetting:
    """What a forget of ``target`` erases; NotFound if nothing (already forgotten marks
    are left out), Invalid if the reason repeats a text (the tombstone keeps the reason)."""
    if target.mark_id is not None:
        mark = tx.marks.get(target.mark_id)
        if mark is None or mark.workspace_id != workspace:
            raise NotFound(f"no mark {target.mark_id}", field="mark_id")
        found = tx.marks.chain(mark.id)
    else:
        subject = normalize_subject(target.subject or "")
        if not subject:
            raise Invalid("must be a non-empty dot path", field="subject")
        found = tx.marks.find(workspace, subject, MARK_STATES)
    marks = [m for m in found if m.state != "forgotten"]
    if not marks:
        raise NotFound(f"nothing to forget: no mark matches {target.name}", field=target.kind)
    evidence = [m.evidence for m in marks]
    for boosts in tx.marks.reinforcements_of([m.id for m in marks]).values():
        evidence += [r.evidence for r in boosts]
    forgetting = Forgetting(target, marks, evidence)
    if carries(reason, forgetting.texts):
        raise Invalid("must not repeat what is forgotten: the tombstone keeps it", field="reason")
    return forgetting


def erase_copies(tx: Tx, signal: Signal, forgetting: Forgetting) -> int:
    """Erase every copy of the texts but the marks': signal payloads, seeds, deliveries'
    checkpoints and errors. Repeatable (a retry after a crash finds less to do); how many
    signal payloads this forget has erased in all."""
    tombstone_id = derived_id("tb", signal.id)
    linked = forgetting.linked - {signal.id}
    kept = _evidence_of_kept_marks(tx, signal.workspace_id, forgetting) - linked
    found = tx.signals.payloads(signal.workspace_id, TEXT_CARRYING_TYPES, sorted(linked))
    carriers = [
        signal_id
        for signal_id, payload in found
        if signal_id != signal.id
        and signal_id not in kept
        and _carries_it(forgetting, signal_id in linked, payload)
    ]
    tx.signals.replace_payloads(carriers, erased_payload(tombstone_id))
    seeds = [
        s.id
        for s in tx.seeds.listing(signal.workspace_id)
        if forgetting.names_seed(s.subject, s.proposed_change, s.based_on_marks)
    ]
    tx.seeds.erase(seeds)
    marker = forgotten_marker(tombstone_id)
    tx.signals.redact_failures(lambda value: redacted(value, forgetting.texts, marker))
    earlier = sum(1 for i, p in found if i not in carriers and p == erased_payload(tombstone_id))
    return earlier + len(carriers)


def _evidence_of_kept_marks(tx: Tx, workspace: str, forgetting: Forgetting) -> set[str]:
    """The signals that made or reinforced the marks this forget leaves under its marks'
    subjects. Forgetting "likes lentil soup" leaves "likes lentil soup a lot" (another mark
    of the subject, say), and the payload that said so with it, though it holds the words.
    (A subject forgotten leaves no mark under it.)"""
    if forgetting.target.mark_id is None:
        return set()
    left = [
        mark
        for subject in forgetting.subjects
        for mark in tx.marks.of_subject(workspace, subject)
        if mark.state != "forgotten" and mark.id not in forgetting.ids
    ]
    evidence = [mark.evidence for mark in left]
    for boosts in tx.marks.reinforcements_of([mark.id for mark in left]).values():
        evidence += [boost.evidence for boost in boosts]
    return {i for e in evidence for i in e.get("signal_ids", [])}


def _carries_it(forgetting: Forgetting, linked: bool, payload: dict[str, Any]) -> bool:
    if isinstance(payload.get("proposed_change"), str):  # a seed's planting
        return forgetting.names_seed(
            payload.get("subject"), payload["proposed_change"], payload.get("based_on_marks")
        )
    if payload.get("text") in forgetting.lines:  # the daily note of a cited line
        return True
    marks = {m.observation for m in forgetting.marks}
    return carries(payload, marks) and (
        linked or about(payload, forgetting.subjects, forgetting.ids)
    )


def forget(
    tx: Tx, signal: Signal, target: ForgetTarget, reason: str, lines: Collection[str] = ()
) -> Tombstone:
    """Erase what ``target`` names (and every copy of ``lines``, the archived lines its
    marks cite, read before they were redacted); the tombstone."""
    forgetting = to_forget(tx, signal.workspace_id, target, reason)
    forgetting = Forgetting(target, forgetting.marks, forgetting.evidence, tuple(lines))
    erased = erase_copies(tx, signal, forgetting)
    tombstone = Tombstone(
        id=derived_id("tb", signal.id),
        workspace_id=signal.workspace_id,
        target=target.name,
        target_kind=target.kind,
        forgotten_by=signal.source_id,
        forgotten_at=signal.emitted_at,
        reason=reason,
        marks_erased=len(forgetting.marks),
        signals_erased=erased,
        signal_id=signal.id,
    )
    tx.marks.erase([m.id for m in forgetting.marks], f"forgotten: {reason}", signal.emitted_at)
    tx.tombstones.insert(tombstone)
    # This process's caches of words held the texts too. (The writer's copy of the
    # subjects' recent marks is kept by the store's triggers: the erase drops them.)
    drop_cached_words()
    drop_cached_counts()
    return tombstone


def archived_lines(daily: DailyLog, cited: Mapping[date, Collection[int]]) -> list[str]:
    """The texts of the archived lines ``cited`` (by day, 1-indexed numbers that exist)."""
    found = []
    for day, numbers in sorted(cited.items()):
        lines = daily.read(day, archived=True) or []
        found += [lines[n - 1] for n in sorted(numbers) if 1 <= n <= len(lines)]
    return found


def live_lines(daily: DailyLog, wanted: Callable[[str], bool]) -> list[tuple[date, int]]:
    """The (day, 1-indexed number) of every live line ``wanted`` accepts, oldest first:
    what a forget leaves to the person, whose files these are."""
    return [
        (day, number)
        for day in daily.days(archived=False)
        for number, line in enumerate(daily.read(day) or [], start=1)
        if wanted(line)
    ]
