"""What :func:`daemon.services.recall.recall` answers: the hits of each layer, and the
documented JSON shape of them (SPEC §6) that the API, the CLI and MCP give."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from daemon.core.clock import iso
from daemon.core.records import Mark
from daemon.core.strength import Strength
from daemon.core.vectors import Coverage
from daemon.files.compost import CompostHit
from daemon.files.substrate import SubstrateHit
from daemon.search.daily import DailyHit


@dataclass(frozen=True)
class MarkHit:
    mark: Mark
    strength: Strength

    def to_json(self, *, history: bool = False, explain: bool = False) -> dict[str, Any]:
        """The documented shape; with ``history``, also how the mark ended and its links;
        with ``explain``, those and how its strength got there (the CLI's text view)."""
        m = self.mark
        shown = self._shown()
        if history or explain:
            shown |= {
                "supersedes": m.supersedes,
                "superseded_by": m.superseded_by,
                "ended_at": iso(m.ended_at) if m.ended_at else None,
                "ended_reason": m.ended_reason,
            }
        if explain:
            s = self.strength
            shown["strength"] = {
                "value": s.value,
                "initial": s.initial,
                "half_life_days": s.half_life_days,
                "age_days": s.age_days,
                "base": s.base,
                "reinforcements": [
                    {"at": iso(part.at), "delta": part.delta, "now": part.now}
                    for part in s.reinforcements
                ],
            }
        return shown

    def _shown(self) -> dict[str, Any]:
        m = self.mark
        return {
            "id": m.id,
            "subject": m.subject,
            "observation": m.observation,
            "current_strength": round(self.strength.value, 6),
            "state": m.state,
            "observed_by": m.observed_by,
            "first_observed_at": iso(m.first_observed_at),
            "last_reinforced_at": iso(m.last_reinforced_at),
            "reinforcement_count": m.reinforcement_count,
            "provenance": m.provenance,
            "evidence": m.evidence,
        }


@dataclass(frozen=True)
class RecallResult:
    substrate: list[SubstrateHit]
    marks: list[MarkHit]
    daily: list[DailyHit]
    compost: list[CompostHit]
    summary: str | None = None
    history: bool = False  # marks carry their supersede links and end
    # With semantic recall on: how much was embedded when this was ranked (the rest was
    # ranked lexically).
    semantic: Coverage | None = None

    def to_json(self, *, explain: bool = False) -> dict[str, Any]:
        """The documented shape (SPEC §6), and with semantic recall on its coverage; with
        ``explain``, each mark also says how its strength got there and how it ended (the
        CLI's text view)."""
        shown: dict[str, Any] = {
            "substrate": [
                {"file": h.file, "excerpt": h.excerpt, "reason": h.reason} for h in self.substrate
            ],
            "marks": [h.to_json(history=self.history, explain=explain) for h in self.marks],
            "daily": [
                {"date": h.date, "excerpt": h.excerpt, "line_range": list(h.line_range)}
                for h in self.daily
            ],
            "compost": [
                {
                    "template_id": h.template_id,
                    "learning": h.learning,
                    "source_agent_count": h.source_agent_count,
                }
                for h in self.compost
            ],
            "summary": self.summary,
        }
        if self.semantic is not None:
            shown["semantic"] = {
                "embedded": self.semantic.embedded,
                "total": self.semantic.total,
            }
        return shown
