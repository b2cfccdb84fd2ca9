"""A mark's history as its page tells it, oldest first: its first observation, each
reinforcement (with the lines it cites), the seeds planted from it, every correction along
its chain (what it said before, what it says after, why), and how it ended (retracted or
forgotten)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from daemon.core.records import Mark, Reinforcement, Seed
from daemon.files.daily import DailyLog
from daemon.loom.data import MarkWithHistory
from daemon.loom.days import EvidenceLines, evidence_lines


@dataclass(frozen=True)
class Entry:
    """One line of the history; ``kind`` says which of the fields it fills."""

    at: datetime
    kind: str  # observed | reinforced | seed | corrected | retracted | forgotten
    mark: Mark | None = None  # corrected: the mark corrected; ended: the mark that ended
    successor: Mark | None = None  # corrected: the mark that replaced it
    boost: Reinforcement | None = None
    lines: EvidenceLines | None = None
    seed: Seed | None = None


def history(found: MarkWithHistory, daily: DailyLog) -> list[Entry]:
    """Blocking (it reads the daily files the evidence cites): run it in a worker thread."""
    mark = found.mark
    entries = [Entry(mark.first_observed_at, "observed", mark=mark)]
    entries += [
        Entry(b.reinforced_at, "reinforced", boost=b, lines=evidence_lines(daily, b.evidence))
        for b in found.reinforcements
    ]
    entries += [Entry(s.planted_at, "seed", seed=s) for s in found.seeds]
    entries += _chain_entries(found.chain)
    return sorted(entries, key=lambda e: e.at)


def _chain_entries(chain: list[Mark]) -> list[Entry]:
    by_id = {m.id: m for m in chain}
    entries = []
    for member in chain:
        if member.ended_at is None:
            continue
        successor = by_id.get(member.superseded_by or "")
        if successor is not None:
            entries.append(Entry(member.ended_at, "corrected", mark=member, successor=successor))
        elif member.state in ("retracted", "forgotten"):
            entries.append(Entry(member.ended_at, member.state, mark=member))
    return entries
