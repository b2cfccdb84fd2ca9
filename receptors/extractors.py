"""Extractors turn a day's log lines into observations for the consolidation receptor.

The receptor only knows the :class:`Extractor` interface; the composition
(:func:`daemon.composition.make_extractor`) picks one by the name in the config
(``[consolidation] extractor``): ``mock`` (the default, and the tests' choice) or ``openai``
(any OpenAI-compatible chat-completions endpoint, :mod:`receptors.llm`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any, Literal, Protocol

Provenance = Literal["stated", "observed", "inferred"]


@dataclass(frozen=True)
class Extraction:
    subject: str
    observation: str
    line_range: tuple[int, int]  # 1-indexed, inclusive, in the lines given to the extractor
    affinity: tuple[str, ...] = ()
    substrate_refs: tuple[str, ...] = ()
    initial_strength: float = 0.7
    provenance: Provenance = "observed"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Extraction:
        return cls(
            subject=data["subject"],
            observation=data["observation"],
            line_range=(data["line_range"][0], data["line_range"][1]),
            affinity=tuple(data["affinity"]),
            substrate_refs=tuple(data["substrate_refs"]),
            initial_strength=data["initial_strength"],
            provenance=data["provenance"],
        )


class Extractor(Protocol):
    name: str

    async def extract(
        self, day: date, lines: Sequence[str], known_subjects: Sequence[str] = ()
    ) -> list[Extraction]:
        """Observations found in ``lines`` (the day's file, line 1 first). ``known_subjects``
        are the subjects the memory already uses, for an extractor that names subjects."""
        ...


_OBS = re.compile(r"^OBS\s+subject=(\S+)\s+(\S.*?)\s*$")


@dataclass
class MockExtractor:
    """Deterministic stand-in for an LLM: a line ``OBS subject=<path> <observation text>``
    yields one observation (strength 0.7); any other line yields nothing."""

    name: str = field(default="mock", init=False)

    async def extract(
        self, day: date, lines: Sequence[str], known_subjects: Sequence[str] = ()
    ) -> list[Extraction]:
        found = []
        for number, line in enumerate(lines, start=1):
            match = _OBS.match(line)
            if match:
                found.append(Extraction(match[1], match[2], (number, number)))
        return found


def unread_note(extractor: Extractor, lines: Sequence[str]) -> str | None:
    """What the mock extractor passed over in ``lines``, said so, since it makes nothing of
    ordinary sentences: a day of them would otherwise consolidate into no marks silently.
    None for any other extractor, or when every written line was in its form."""
    if not isinstance(extractor, MockExtractor):
        return None
    written = [line for line in lines if line.strip()]
    read = sum(1 for line in written if _OBS.match(line))
    if read == len(written):
        return None
    return (
        f"{len(written)} lines, {read} in the `OBS subject=` form the mock extractor reads; "
        'configure [llm] and [consolidation] extractor = "openai" to extract from natural text'
    )
