"""recall at scale: a year of memory, queried by subject.

100,000 marks over 1,000 subjects (each citing a line of a daily file as its evidence),
1,000 substrate files and 365 daily files of 50 lines (the last week live, the rest
archived, as the nightly consolidation leaves them). Timed, per query, for random subjects:

- recall, marks layer only, and recall over all four layers (in process, as the API's
  worker thread runs it);
- beside them, the floor: the raw SQL prefix query that returns the same mark rows
  (sqlite3, no ORM), on the same table.

    .venv/bin/python -m bench.recall_scale
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from bench.harness import SUBJECTS, scratch
from bench.report import Figure, Part, at_most, main_for, percentiles
from daemon.core.records import Mark
from daemon.files.compost import Compost
from daemon.files.daily import DailyLog
from daemon.files.substrate import Substrate
from daemon.schema.recall import RecallQuery
from daemon.services.recall import Memory, RecallResult, recall
from daemon.store import Store, Tx
from daemon.store.migrate import upgrade

MARKS = 100_000
SUBSTRATE_FILES = 1_000
DAYS = 365
LIVE_DAYS = 7
LINES_PER_DAY = 50
QUERIES = 300
BATCH = 5_000
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
WORKSPACE = "default"

RAW_PREFIX_QUERY = (
    "SELECT * FROM memory_marks WHERE workspace_id = ? AND subject LIKE ? ESCAPE '\\' "
    "AND (subject = ? OR subject LIKE ? ESCAPE '\\') AND state IN ('active', 'promoted')"
)


def _insert_marks(marks: list[Mark], tx: Tx) -> None:
    tx.marks.insert(marks)


def subject(n: int) -> str:
    return f"user.area{n // 20}.topic{n % 20}"


class Words:
    """Deterministic filler text from a vocabulary of made-up words, now and then naming a
    subject's parts so that text search has something to find."""

    def __init__(self, rng: random.Random) -> None:
        syllables = ["ka", "lo", "mi", "ren", "sa", "tu", "vel", "dor", "pin", "gra", "fe", "nos"]
        self.rng = rng
        self.vocabulary = [
            "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(3_000)
        ]

    def line(self) -> str:
        words = self.rng.choices(self.vocabulary, k=self.rng.randint(6, 14))
        if self.rng.random() < 0.1:
            words.append(subject(self.rng.randrange(SUBJECTS)).replace(".", " "))
        return " ".join(words)


def write_files(root: Path, words: Words) -> tuple[Path, Path]:
    substrate, daily = root / "substrate", root / "daily"
    substrate.mkdir()
    (daily / "archive").mkdir(parents=True)
    for n in range(SUBSTRATE_FILES):
        lines = [f"# Note {n}", *(words.line() for _ in range(20))]
        (substrate / f"note-{n:04d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for day in days():
        folder = daily if day > NOW.date() - timedelta(days=LIVE_DAYS) else daily / "archive"
        lines = [words.line() for _ in range(LINES_PER_DAY)]
        (folder / f"{day.isoformat()}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return substrate, daily


def days() -> list[date]:
    return [NOW.date() - timedelta(days=n) for n in range(DAYS)]


def make_marks(rng: random.Random) -> list[Mark]:
    all_days = days()
    marks = []
    for n in range(MARKS):
        observed = NOW - timedelta(seconds=rng.uniform(0, 30 * 86_400))
        line = rng.randint(1, LINES_PER_DAY)
        marks.append(
            Mark(
                id=f"mk_bench_{n:06d}",
                workspace_id=WORKSPACE,
                subject=subject(n % SUBJECTS),
                observation=f"observation {n} about {subject(n % SUBJECTS)}",
                evidence={
                    "daily_file": f"{rng.choice(all_days).isoformat()}.md",
                    "line_range": [line, line],
                    "signal_ids": [f"sig{n}"],
                },
                initial_strength=0.7,
                half_life_days=14.0,
                observed_by="bench",
                first_observed_at=observed,
                last_reinforced_at=observed,
                created_at=observed,
                updated_at=observed,
            )
        )
    return marks


def timed(
    queries: dict[str, Callable[[str], object]], subjects: list[str]
) -> dict[str, list[float]]:
    """Milliseconds per call of each query for each subject. The queries take turns on each
    subject, so each meets the same cache state; one untimed pass warms the caches first."""
    samples: dict[str, list[float]] = {name: [] for name in queries}
    for timing in (False, True):
        for about in subjects:
            for name, query in queries.items():
                started = time.perf_counter()
                query(about)
                if timing:
                    samples[name].append((time.perf_counter() - started) * 1000)
    return samples


def build(root: Path, rng: random.Random) -> Memory:
    """The store, filled in big batches straight through the store API, and the files."""
    url = f"sqlite:///{root / 'recall.db'}"
    upgrade(url)
    store = Store(url)
    marks = make_marks(rng)
    for start in range(0, MARKS, BATCH):
        store.write_sync(partial(_insert_marks, marks[start : start + BATCH]))
    substrate, daily = write_files(root, Words(rng))
    return Memory(
        store=store,
        substrate=Substrate([substrate]),
        daily=DailyLog(daily),
        compost=Compost(root / "compost"),
        workspace=WORKSPACE,
        zone=ZoneInfo("Europe/Berlin"),
    )


def run() -> Part:
    rng = random.Random(20261130)
    with scratch() as root:
        memory = build(root, rng)
        raw = sqlite3.connect(root / "recall.db")

        def raw_sql(about: str) -> list[Any]:
            parameters = (WORKSPACE, about + "%", about, about + ".%")
            return raw.execute(RAW_PREFIX_QUERY, parameters).fetchall()

        def recall_marks(about: str) -> RecallResult:
            return recall(RecallQuery(about=about, layers=("marks",)), memory, NOW)

        def recall_all(about: str) -> RecallResult:
            return recall(RecallQuery(about=about), memory, NOW)

        subjects = [subject(rng.randrange(SUBJECTS)) for _ in range(QUERIES)]
        assert len(raw_sql(subjects[0])) == MARKS // SUBJECTS
        samples = timed(
            {
                "raw SQL prefix query": raw_sql,
                "recall, marks only": recall_marks,
                "recall, all layers": recall_all,
            },
            subjects,
        )
        raw.close()
        memory.store.close()
    figures = {name: percentiles(values) for name, values in samples.items()}
    result = [
        Figure(f"{name} {label}", value, "ms")
        for name, (p50, p99) in figures.items()
        for label, value in (("p50", p50), ("p99", p99))
    ]
    marks_only, floor = figures["recall, marks only"], figures["raw SQL prefix query"]
    result += [
        at_most("recall marks-only p99 / raw SQL p99", marks_only[1] / floor[1], 3.0, "x"),
        Figure("recall marks-only p50 / raw SQL p50", marks_only[0] / floor[0], "x"),
    ]
    return Part(
        "recall",
        result,
        {"marks": MARKS, "subjects": SUBJECTS, "rows_per_subject": MARKS // SUBJECTS},
    )


if __name__ == "__main__":
    main_for(run)
