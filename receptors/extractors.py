"""Extractors turn a day's log lines into observations for the consolidation receptor.

The receptor only knows the :class:`Extractor` interface and picks one by the name in the
config (``[consolidation] extractor``), so a real LLM extractor is one new class plus one
line in :data:`EXTRACTORS`, without touching the receptor.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Protocol


@dataclass(frozen=True)
class Extraction:
    subject: str
    observation: str
    line_range: tuple[int, int]  # 1-indexed, inclusive, in the lines given to the extractor
    affinity: tuple[str, ...] = ()
    substrate_refs: tuple[str, ...] = ()
    initial_strength: float = 0.7


class Extractor(Protocol):
    name: str

    async def extract(self, day: date, lines: Sequence[str]) -> list[Extraction]:
        """Observations found in ``lines`` (the day's file, line 1 first)."""
        ...


_OBS = re.compile(r"^OBS\s+subject=(\S+)\s+(\S.*?)\s*$")


@dataclass
class MockExtractor:
    """Deterministic stand-in for an LLM: a line ``OBS subject=<path> <observation text>``
    yields one observation (strength 0.7); any other line yields nothing."""

    name: str = field(default="mock", init=False)

    async def extract(self, day: date, lines: Sequence[str]) -> list[Extraction]:
        found = []
        for number, line in enumerate(lines, start=1):
            match = _OBS.match(line)
            if match:
                found.append(Extraction(match[1], match[2], (number, number)))
        return found


EXTRACTORS: dict[str, Callable[[], Extractor]] = {"mock": MockExtractor}


def make_extractor(name: str) -> Extractor:
    try:
        return EXTRACTORS[name]()
    except KeyError:
        raise ValueError(
            f"unknown extractor {name!r}; known: {', '.join(sorted(EXTRACTORS))}"
        ) from None
