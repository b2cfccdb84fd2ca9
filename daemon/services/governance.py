"""Correct, retract, forget: the rules for a person governing their memory, in one place.

The command path (:mod:`daemon.services.commands`) checks them before emitting a signal (to
refuse at once); the governance receptor applies them when the signal is delivered, inside
the bus's transaction, so each change is one atomic step recorded in the signal log.
Refusals are the domain's (:mod:`daemon.services.errors`), naming the field at fault.

- A correction supersedes a standing mark with a new one (same subject) linked both ways.
- A retraction ends a standing mark; its text stays, for the history.
- Forgetting erases the text of the matching marks (a subject prefix, or one mark and its
  correction chain), of their reinforcements' evidence and of every signal payload that
  carried it, and leaves a tombstone: who, when, why and how many. The signals themselves
  stay in the log (their count and order are the audit trail).
"""

from __future__ import annotations

from dataclasses import dataclass

from daemon.core.forgetting import TEXT_CARRYING_TYPES, about, carries, erased_payload
from daemon.core.records import MARK_STATES, Mark, Tombstone, derived_id
from daemon.core.signal import Signal
from daemon.core.subjects import normalize_subject
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


def to_forget(tx: Tx, workspace: str, target: ForgetTarget) -> list[Mark]:
    """The marks a forget of ``target`` erases (already forgotten ones left out)."""
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
    return [m for m in found if m.state != "forgotten"]


def forget(tx: Tx, signal: Signal, target: ForgetTarget, reason: str) -> Tombstone:
    """Erase what ``target`` names; the tombstone. Forgetting nothing still leaves one (the
    person asked; the answer is "0 marks")."""
    marks = to_forget(tx, signal.workspace_id, target)
    texts = {m.observation for m in marks}
    linked = {i for m in marks for i in m.evidence.get("signal_ids", [])}
    for boosts in tx.marks.reinforcements_of([m.id for m in marks]).values():
        linked.update(i for r in boosts for i in r.evidence.get("signal_ids", []))
    linked.discard(signal.id)
    subjects, ids = {m.subject for m in marks}, {m.id for m in marks}
    carriers = [
        signal_id
        for signal_id, payload in tx.signals.payloads(
            signal.workspace_id, TEXT_CARRYING_TYPES, sorted(linked)
        )
        if signal_id != signal.id
        and carries(payload, texts)
        and (signal_id in linked or about(payload, subjects, ids))
    ]
    tombstone = Tombstone(
        id=derived_id("tb", signal.id),
        workspace_id=signal.workspace_id,
        target=target.name,
        target_kind=target.kind,
        forgotten_by=signal.source_id,
        forgotten_at=signal.emitted_at,
        reason=reason,
        marks_erased=len(marks),
        signals_erased=len(carriers),
        signal_id=signal.id,
    )
    tx.marks.erase([m.id for m in marks], f"forgotten: {reason}", signal.emitted_at)
    tx.signals.replace_payloads(carriers, erased_payload(tombstone.id))
    tx.tombstones.insert(tombstone)
    return tombstone
