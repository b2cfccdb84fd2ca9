"""Consolidation you can measure: how well an extractor turns LoCoMo days into marks.

Each day file of a LoCoMo dev conversation (``locomo-dev/<conv>/daily/``) is consolidated
with the extractor a config names (``[consolidation] extractor``, and ``[llm]`` for
``openai``; without ``--config``, the built-in ``mock``) by the real consolidation receptor,
bus and store, in a temporary directory (the day files are copied there, never written in
place). The marks made are then scored against the conversation's gold facts
(``observations.json``: each fact with the lines it comes from):

- **coverage**: the share of gold facts matched by a mark citing the same day. A mark
  matches a fact when their similarity reaches the threshold: the cosine similarity of the
  project's own sentence embeddings (:mod:`daemon.search.semantic`, the ``semantic`` extra),
  ``>= 0.6`` by default; without that extra, token overlap: the share of the fact's stemmed
  words (:func:`daemon.search.text.terms`) that the mark holds, ``>= 0.5`` by default.
- **evidence precision**: of the matched facts, the share matched by a mark whose line range
  holds one of the fact's evidence lines.
- **marks per day**, and **seconds** and **tokens** (as the model server counted them) per
  day of consolidation. A day whose delivery died is counted and its error shown.

Run from the repository root::

    .venv/bin/python -m bench.extraction [--config cambium.toml] [--only conv-26] [--days 3]

The data directory is found as for :mod:`bench.locomo` (``CAMBIUM_BENCH_DATA``). Results are
written to ``bench/results/extraction.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import structlog

from bench.locomo import data_directory
from bench.report import RESULTS, Figure, Part
from daemon.bus import RetryPolicy, SignalBus
from daemon.config import Config, RecallConfig, load_config, parse_config
from daemon.core.days import parse_day
from daemon.core.records import CURRENT_MARK_STATES
from daemon.core.signal import Signal
from daemon.files.daily import DailyLog
from daemon.search.text import terms
from daemon.store import Store
from daemon.store.migrate import upgrade
from receptors.consolidation import ConsolidationReceptor
from receptors.extractors import Extractor

OUTPUT = RESULTS / "extraction.json"
THRESHOLDS = {"semantic": 0.6, "tokens": 0.5}

Line = tuple[str, int]  # (YYYY-MM-DD, 1-indexed line number)
Similarity = Callable[[Sequence[str], Sequence[str]], list[list[float]]]


@dataclass(frozen=True)
class GoldFact:
    text: str
    evidence: frozenset[Line]

    @property
    def days(self) -> set[str]:
        return {day for day, _ in self.evidence}


@dataclass(frozen=True)
class Found:
    """A mark, as scored: its text and the day and lines it cites."""

    text: str
    day: str
    lines: tuple[int, int]

    def cites(self, fact: GoldFact) -> bool:
        return any(
            day == self.day and self.lines[0] <= n <= self.lines[1] for day, n in fact.evidence
        )


@dataclass(frozen=True)
class Day:
    """One day's consolidation: what it made and what it cost."""

    day: str
    outcome: str
    seconds: float
    tokens: int
    error: str | None = None


@dataclass(frozen=True)
class Score:
    facts: int
    matched: int
    precise: int

    @property
    def coverage(self) -> float:
        return self.matched / self.facts if self.facts else 0.0

    @property
    def evidence_precision(self) -> float:
        return self.precise / self.matched if self.matched else 0.0


def gold_facts(conversation: Path, days: set[str]) -> list[GoldFact]:
    """The conversation's gold facts whose evidence lies in ``days``."""
    facts = []
    for item in json.loads((conversation / "observations.json").read_text(encoding="utf-8")):
        evidence = frozenset(
            (parse_day(Path(e["file"]).stem).isoformat(), int(e["line"])) for e in item["evidence"]
        )
        if evidence and {day for day, _ in evidence} <= days:
            facts.append(GoldFact(item["text"], evidence))
    return facts


def token_overlap(gold: Sequence[str], found: Sequence[str]) -> list[list[float]]:
    """For each gold text, the share of its stemmed words that each found text holds."""
    found_terms = [set(terms(text)) for text in found]
    rows = []
    for text in gold:
        wanted = set(terms(text))
        rows.append([len(wanted & have) / len(wanted) if wanted else 0.0 for have in found_terms])
    return rows


def embedding_similarity(directory: Path) -> Similarity | None:
    """Cosine similarity of the project's sentence embeddings; None without the extra."""
    try:
        from daemon.search.embedding import SemanticUnavailable
        from daemon.search.semantic import load_semantic
    except ImportError:
        return None
    try:
        semantic = load_semantic(RecallConfig(semantic=True, embeddings=directory / "emb.sqlite"))
    except SemanticUnavailable:
        return None

    def similarity(gold: Sequence[str], found: Sequence[str]) -> list[list[float]]:
        if not gold or not found:
            return [[] for _ in gold]
        matrix = semantic.embed_texts(gold) @ semantic.embed_texts(found).T  # rows normalised
        return [[float(value) for value in row] for row in matrix]

    return similarity


def score(
    gold: Sequence[GoldFact], found: Sequence[Found], similarity: Similarity, threshold: float
) -> Score:
    """Match each gold fact against the marks citing its days."""
    matched = precise = 0
    for fact in gold:
        candidates = [f for f in found if f.day in fact.days]
        if not candidates:
            continue
        [row] = similarity([fact.text], [f.text for f in candidates])
        matching = [f for f, value in zip(candidates, row, strict=True) if value >= threshold]
        if matching:
            matched += 1
            precise += any(f.cites(fact) for f in matching)
    return Score(len(gold), matched, precise)


def _tokens(extractor: Extractor) -> int:
    client = getattr(extractor, "client", None)  # the openai extractor's ChatClient
    return int(getattr(client, "tokens_used", 0))


async def consolidate(
    extractor: Extractor, days: Sequence[Path], directory: Path
) -> tuple[list[Found], list[Day]]:
    """Consolidate each day file with ``extractor`` in a fresh store under ``directory``:
    the marks made and each day's cost."""
    daily_dir = directory / "daily"
    daily_dir.mkdir()
    for path in days:
        shutil.copyfile(path, daily_dir / path.name)
    url = f"sqlite:///{directory / 'store.sqlite'}"
    upgrade(url)
    store = Store(url)
    store.start()
    try:
        daily = DailyLog(daily_dir)
        receptor = ConsolidationReceptor(store, daily, extractor, zone=ZoneInfo("UTC"))
        costs = []
        async with SignalBus(store, [receptor], retry=RetryPolicy(max_attempts=1)) as bus:
            for path in days:
                costs.append(
                    await _one_day(bus, store, extractor, parse_day(path.stem).isoformat())
                )
        # Every live mark counts, withered too: LoCoMo's days are years old, and a mark is as
        # old as its evidence, so most have faded by the time they are made.
        marks = store.read_sync(lambda tx: tx.marks.find("default", "", CURRENT_MARK_STATES))
    finally:
        store.close()
    found = [
        Found(m.observation, m.evidence["daily_file"][:-3], _line_range(m.evidence)) for m in marks
    ]
    return found, costs


def _line_range(evidence: dict[str, Any]) -> tuple[int, int]:
    first, last = evidence["line_range"]
    return int(first), int(last)


async def _one_day(bus: SignalBus, store: Store, extractor: Extractor, day: str) -> Day:
    signal = Signal.parse(
        {"type": "memory.consolidate", "source_id": "bench", "payload": {"date": day}},
        now=datetime.now(UTC),
    )
    tokens, started = _tokens(extractor), time.perf_counter()
    stored = await bus.emit(signal)
    status = (await bus.settled(stored.id))["consolidation"]
    seconds = time.perf_counter() - started
    error = None
    if status != "delivered":
        found = store.read_sync(lambda tx: tx.signals.get(stored.id))
        error = found.deliveries[0].last_error if found else None
    return Day(day, status, seconds, _tokens(extractor) - tokens, error)


def extractor_from(config_file: Path | None) -> tuple[Extractor, Config]:
    """The extractor the config names (the mock without one)."""
    from daemon.composition import make_extractor

    config = load_config(config_file) if config_file else parse_config({})
    return make_extractor(config), config


def measure(
    extractor: Extractor,
    conversations: Sequence[Path],
    days: int | None = None,
    match: str | None = None,
    threshold: float | None = None,
) -> dict[str, Any]:
    """Consolidate and score ``conversations`` (their first ``days`` days): the figures."""
    with tempfile.TemporaryDirectory(prefix="cambium-extraction-") as scratch:
        root = Path(scratch)
        similarity = embedding_similarity(root) if match in (None, "semantic") else None
        if match == "semantic" and similarity is None:
            raise SystemExit("--match semantic needs the semantic extra")
        method = "semantic" if similarity is not None else "tokens"
        cut = THRESHOLDS[method] if threshold is None else threshold
        totals, costs, marks = Score(0, 0, 0), [], 0
        for conversation in conversations:
            files = sorted((conversation / "daily").glob("*.md"))[:days]
            workdir = root / conversation.name
            workdir.mkdir()
            found, spent = anyio.run(consolidate, extractor, files, workdir)
            gold = gold_facts(conversation, {parse_day(f.stem).isoformat() for f in files})
            part = score(gold, found, similarity or token_overlap, cut)
            totals = Score(
                totals.facts + part.facts,
                totals.matched + part.matched,
                totals.precise + part.precise,
            )
            costs += spent
            marks += len(found)
    count = max(len(costs), 1)
    return {
        "extractor": extractor.name,
        "match": method,
        "threshold": cut,
        "conversations": [c.name for c in conversations],
        "days": len(costs),
        "gold_facts": totals.facts,
        "marks": marks,
        "coverage": round(totals.coverage, 3),
        "evidence_precision": round(totals.evidence_precision, 3),
        "marks_per_day": round(marks / count, 2),
        "seconds_per_day": round(sum(c.seconds for c in costs) / count, 3),
        "tokens_per_day": round(sum(c.tokens for c in costs) / count, 1),
        "dead_days": [asdict(c) for c in costs if c.outcome != "delivered"],
    }


def run() -> Part:
    """The mock extractor's figures on every dev conversation, for ``python -m bench``."""
    extractor, _ = extractor_from(None)
    results = measure(extractor, conversations(None))
    return Part(
        "extraction",
        [
            Figure("mock extractor coverage", results["coverage"], ""),
            Figure("mock extractor marks per day", results["marks_per_day"], "marks"),
        ],
        {key: results[key] for key in ("match", "threshold", "days", "gold_facts")},
    )


def conversations(only: str | None) -> list[Path]:
    root = data_directory()
    if not root.is_dir():
        raise SystemExit(
            f"no LoCoMo data at {root}: set CAMBIUM_BENCH_DATA to the directory "
            "that holds locomo-dev/"
        )
    found = sorted(p for p in root.iterdir() if (p / "observations.json").is_file())
    if only:
        wanted = set(only.split(","))
        found = [p for p in found if p.name in wanted]
    return found


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.extraction", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--config", type=Path, help="a cambium config naming the extractor")
    parser.add_argument("--only", help="comma-separated conversations (default: all)")
    parser.add_argument("--days", type=int, help="the first N days of each conversation")
    parser.add_argument("--match", choices=sorted(THRESHOLDS), help="default: semantic if present")
    parser.add_argument("--threshold", type=float, help="default: 0.6 semantic, 0.5 tokens")
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"default: {OUTPUT}")
    arguments = parser.parse_args(argv)
    # The bus's and the receptor's info lines would bury the figures.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    extractor, _ = extractor_from(arguments.config)
    results = measure(
        extractor,
        conversations(arguments.only),
        arguments.days,
        arguments.match,
        arguments.threshold,
    )
    arguments.output.parent.mkdir(parents=True, exist_ok=True)
    arguments.output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    for key, value in results.items():
        if key != "dead_days":
            print(f"{key:20} {value}")
    for dead in results["dead_days"]:
        print(f"dead day {dead['day']}: {dead['error']}")


if __name__ == "__main__":
    main()
