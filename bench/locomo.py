"""LoCoMo: how well the daily layer finds the lines that answer a question.

The data (``locomo-dev/`` in the shared benchmark directory; see its README) holds five
LoCoMo conversations turned into daily files, one per session, and their questions with
the file and line of each answer. Every question of categories 1-4 that has evidence is
put to :meth:`DailyLog.search` - the code recall runs - over its conversation's daily
files. The hits, in rank order, are expanded into their lines; a question counts as found
at ``k`` when one of its evidence lines is among the first ``k`` lines.

Beside it, in the same run, a plain BM25 baseline ranks single lines (lines as documents
per conversation, the same tokenizer and stemmer, Okapi BM25 with k1 = 1.2, b = 0.75 and
the non-negative idf ``ln(1 + (N - n + 0.5) / (n + 0.5))``), scored at its first ``k`` lines.

Run from the repository root::

    .venv/bin/python -m bench.locomo

The benchmark directory (the one holding ``locomo-dev/``) is ``../shared/bench`` next to the
repository unless ``CAMBIUM_BENCH_DATA`` names another. The data is read in place, never
copied, and its daily directories are only searched. Results are written to
``bench/results/locomo.json``.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from daemon.core.days import parse_day
from daemon.files.daily import DailyLog
from daemon.files.text import K1, B, terms

REPOSITORY = Path(__file__).resolve().parent.parent
RESULTS = REPOSITORY / "bench" / "results" / "locomo.json"
CATEGORIES = (1, 2, 3, 4)  # 5 (adversarial) has no answer in the conversation
KS = (5, 10)
SEARCH_LIMIT = 10

Line = tuple[str, int]  # (YYYY-MM-DD, 1-indexed line number)


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[Line]


def data_directory() -> Path:
    root = Path(os.environ.get("CAMBIUM_BENCH_DATA", REPOSITORY.parent / "shared" / "bench"))
    return root / "locomo-dev"


def questions(conversation: Path) -> list[Question]:
    found = []
    for item in json.loads((conversation / "qa.json").read_text(encoding="utf-8")):
        if item["category"] not in CATEGORIES or not item["evidence"]:
            continue
        evidence = frozenset(
            (parse_day(Path(e["file"]).stem).isoformat(), int(e["line"])) for e in item["evidence"]
        )
        found.append(Question(item["question"], item["category"], evidence))
    return found


def daily_search(daily: DailyLog, question: str) -> list[Line]:
    """The lines of the daily search's hits, best hit first."""
    hits = daily.search(question, since=None, limit=SEARCH_LIMIT)
    return [(hit.date, n) for hit in hits for n in range(hit.line_range[0], hit.line_range[1] + 1)]


class Baseline:
    """Plain BM25 over the single lines of one conversation."""

    def __init__(self, daily: DailyLog) -> None:
        self.lines: list[Line] = []
        self.lengths: list[int] = []
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for day in daily.days(archived=False):
            for number, text in enumerate(daily.read(day) or [], start=1):
                counts = Counter(terms(text))
                for term, count in counts.items():
                    self.postings[term].append((len(self.lines), count))
                self.lines.append((day.isoformat(), number))
                self.lengths.append(counts.total())
        self.average_length = sum(self.lengths) / len(self.lengths)

    def rank(self, question: str, k: int) -> list[Line]:
        count = len(self.lines)
        scores: defaultdict[int, float] = defaultdict(float)
        for term in set(terms(question)):
            posting = self.postings.get(term, [])
            idf = math.log(1 + (count - len(posting) + 0.5) / (len(posting) + 0.5))
            for line, tf in posting:
                norm = K1 * (1 - B + B * self.lengths[line] / self.average_length)
                scores[line] += idf * tf * (K1 + 1) / (tf + norm)
        best = heapq.nsmallest(k, scores, key=lambda line: (-scores[line], line))
        return [self.lines[line] for line in best]


RANKERS = {"daily_search": "daily search (ours)", "bm25_baseline": "BM25 lines (baseline)"}


def main() -> None:
    root = data_directory()
    if not root.is_dir():
        raise SystemExit(
            f"no LoCoMo data at {root}: set CAMBIUM_BENCH_DATA to the directory "
            "that holds locomo-dev/"
        )
    conversations = sorted(p for p in root.iterdir() if (p / "qa.json").is_file())
    asked: Counter[int] = Counter()  # questions per category
    found: defaultdict[tuple[str, int], Counter[int]] = defaultdict(Counter)  # per ranker, category
    seconds: defaultdict[str, float] = defaultdict(float)
    for conversation in conversations:
        daily = DailyLog(conversation / "daily")
        daily.search("warm up", since=None, limit=1)  # reads and indexes the files
        baseline = Baseline(daily)
        rankers: dict[str, Callable[[str], list[Line]]] = {
            "daily_search": partial(daily_search, daily),
            "bm25_baseline": partial(baseline.rank, k=max(KS)),
        }
        for question in questions(conversation):
            asked[question.category] += 1
            for name, rank in rankers.items():
                started = time.perf_counter()
                lines = rank(question.text)
                seconds[name] += time.perf_counter() - started
                for k in KS:
                    if question.evidence & set(lines[:k]):
                        found[(name, question.category)][k] += 1

    def share(name: str, categories: Iterable[int]) -> dict[str, float]:
        asked_here = list(categories)
        n = sum(asked[c] for c in asked_here)
        return {f"k{k}": round(sum(found[(name, c)][k] for c in asked_here) / n, 4) for k in KS}

    total = asked.total()
    results = {
        "data": str(root),
        "conversations": [p.name for p in conversations],
        "questions": total,
        **{name: share(name, asked) for name in RANKERS},
        "by_category": {
            str(category): {
                "questions": asked[category],
                **{name: share(name, [category]) for name in RANKERS},
            }
            for category in sorted(asked)
        },
        "ms_per_question": {name: round(1000 * seconds[name] / total, 3) for name in RANKERS},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")

    print(f"LoCoMo dev: {total} questions (categories 1-4 with evidence)")
    print(f"{'':24}{'k=5':>8}{'k=10':>8}{'ms/question':>14}")
    for name, label in RANKERS.items():
        at = share(name, asked)
        print(f"{label:24}{at['k5']:>8.3f}{at['k10']:>8.3f}{1000 * seconds[name] / total:>14.2f}")
    print(f"written to {RESULTS.relative_to(REPOSITORY)}")


if __name__ == "__main__":
    main()
