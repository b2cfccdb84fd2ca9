"""LoCoMo: how well the daily layer finds the lines that answer a question.

The data (``locomo-dev/`` in the shared benchmark directory; see its README) holds five
LoCoMo conversations turned into daily files, one per session, and their questions with
the file and line of each answer. Every question of categories 1-4 that has evidence is
put to :meth:`DailyLog.search` - the code recall runs - over its conversation's daily
files. The hits, in rank order, are expanded into their lines; a question counts as found
at ``k`` when one of its evidence lines is among the first ``k`` lines.

The daily search runs twice: lexical (as recall runs by default) and hybrid (``[recall]
semantic = true``: the same lexical ranking fused with the lines' stored vectors, which the
daemon's embedding worker computes and the search reads from their memory-mapped int8
copy; see :mod:`daemon.services.dense_store`).

Beside them, in the same run, a plain BM25 baseline ranks
single lines (lines as documents per conversation, the same tokenizer and stemmer, Okapi
BM25 with k1 = 1.2, b = 0.75 and the non-negative idf ``ln(1 + (N - n + 0.5) / (n +
0.5))``), scored at its first ``k`` lines.

Latency is per question, with every line already indexed and embedded (the hybrid time
includes embedding the question), as wall-clock time and as the searching thread's CPU
time; the model runs on one thread (the default), so on a busy machine the CPU time is
the better estimate of an idle machine's latency. The embedding cost is measured while
the hybrid search embeds each conversation's lines for the first time (into a fresh cache
in a temporary directory) by the embedding worker, with the process's resident memory
after it. Without the
``semantic`` extra the hybrid row is left out.

The hybrid ranking's constants were chosen on half of the conversations (``TUNED_ON``);
the results are also given for each half, so that the held-out half shows how much of the
gain is fitted to the data.

Run from the repository root::

    .venv/bin/python -m bench.locomo [--only conv-26,conv-30]

``--only`` runs some conversations (for a quick look while changing the ranking; the
figures to report are those of a full run).

The benchmark directory (the one holding ``locomo-dev/``) is ``../shared/bench`` next to the
repository unless ``CAMBIUM_BENCH_DATA`` names another. The data is read in place, never
copied, and its daily directories are only searched. Results are written to
``bench/results/locomo.json``.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from daemon.config import RecallConfig
from daemon.core.days import parse_day
from daemon.files.daily import DailyLog
from daemon.search.text import K1, B, terms
from daemon.services.mark_search import MarkSearch
from daemon.store import Store, StoreTextIndex
from daemon.store.migrate import upgrade
from daemon.testing import postgres_schema

REPOSITORY = Path(__file__).resolve().parent.parent
RESULTS = REPOSITORY / "bench" / "results" / "locomo.json"
CATEGORIES = (1, 2, 3, 4)  # 5 (adversarial) has no answer in the conversation
KS = (5, 10)
SEARCH_LIMIT = 10
# The half of the conversations the hybrid ranking was tuned on; the others are held out.
TUNED_ON = frozenset({"conv-26", "conv-30", "conv-41"})

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


RANKERS = {
    "daily_search": "daily search, lexical",
    "hybrid_search": "daily search, hybrid",
    "bm25_baseline": "BM25 lines (baseline)",
}


@dataclass
class Embedding:
    """The dense side of the hybrid ranker, and what embedding the lines cost."""

    hybrid_log: Callable[[Path, Store, Path], DailyLog]
    lines: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # of this thread, which runs the model
    model_seconds: float = 0.0
    model_rss_mb: float = 0.0


def load_embedding(directory: Path) -> Embedding | None:
    """The packaged model with a fresh embedding cache in ``directory``; None without the
    ``semantic`` extra."""
    try:
        from daemon.search.semantic import load_semantic
        from daemon.services.dense_store import StoredLines, StoredVectors
        from daemon.services.embedding_worker import EmbeddingWorker
    except ImportError:
        return None
    before = rss_mb()
    started = time.perf_counter()
    shared = load_semantic(RecallConfig(semantic=True, embeddings=directory / "embeddings.sqlite"))
    shared.embed_query("warm up")
    seconds = time.perf_counter() - started

    def hybrid_log(daily: Path, store: Store, scratch: Path) -> DailyLog:
        """The conversation's daily log ranking with its lines' stored vectors, every line
        embedded by the worker as the daemon does it."""
        model, dimension = shared.embedder.model_id, shared.embedder.dimension
        vectors = StoredVectors(store, scratch / "vectors", model, dimension, writable=True)
        log = DailyLog(daily, StoredLines(vectors, shared), index=StoreTextIndex(store))
        worker = EmbeddingWorker(vectors, shared, log, MarkSearch(), batch=64)
        vectors.prepare(worker.stopped)
        log.refresh()
        worker.run_once()
        return log

    return Embedding(hybrid_log, model_seconds=seconds, model_rss_mb=rss_mb() - before)


def new_store(stores: ExitStack, scratch: str, server: str | None = None) -> Store:
    """A fresh store as the daemon keeps it (one conversation's statistics): an SQLite file,
    or with ``server`` (a PostgreSQL URL) a schema of its own there, dropped afterwards."""
    url = f"sqlite:///{tempfile.mkdtemp(dir=scratch)}/cambium.db"
    if server is not None:
        url, _ = stores.enter_context(postgres_schema(server, prefix="locomo_"))
    upgrade(url)
    store = Store(url)
    store.start()
    stores.callback(store.close)
    return store


def rss_mb() -> float:
    """This process's resident memory now, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def line_count(daily: DailyLog) -> int:
    return sum(len(daily.read(day) or []) for day in daily.days(archived=False))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.locomo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--only", help="comma-separated conversations to run (default: all)")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="a PostgreSQL server to keep each conversation's index in, a schema each"
        " (default: an SQLite file each); results go to locomo-postgresql.json",
    )
    arguments = parser.parse_args()
    server = arguments.store
    results_file = RESULTS if server is None else RESULTS.with_name("locomo-postgresql.json")
    root = data_directory()
    if not root.is_dir():
        raise SystemExit(
            f"no LoCoMo data at {root}: set CAMBIUM_BENCH_DATA to the directory "
            "that holds locomo-dev/"
        )
    conversations = sorted(p for p in root.iterdir() if (p / "qa.json").is_file())
    if arguments.only:
        chosen = set(arguments.only.split(","))
        unknown = chosen - {p.name for p in conversations}
        if unknown:
            raise SystemExit(f"no such conversation: {', '.join(sorted(unknown))}")
        conversations = [p for p in conversations if p.name in chosen]
    asked: Counter[int] = Counter()  # questions per category
    found: defaultdict[tuple[str, int], Counter[int]] = defaultdict(Counter)  # per ranker, category
    # Per ranker and half ("tuned", "held out"): questions found at each k, and asked.
    by_half: defaultdict[tuple[str, str], Counter[int]] = defaultdict(Counter)
    asked_by_half: Counter[str] = Counter()
    latencies: defaultdict[str, list[float]] = defaultdict(list)
    cpu: defaultdict[str, list[float]] = defaultdict(list)  # this thread's CPU time
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as stores:
        embedding = load_embedding(Path(scratch))
        for conversation in conversations:
            daily = DailyLog(
                conversation / "daily", index=StoreTextIndex(new_store(stores, scratch, server))
            )
            daily.search("warm up", since=None, limit=1)  # reads and indexes the files
            baseline = Baseline(daily)
            rankers: dict[str, Callable[[str], list[Line]]] = {
                "daily_search": partial(daily_search, daily),
                "bm25_baseline": partial(baseline.rank, k=max(KS)),
            }
            if embedding is not None:
                store = new_store(stores, scratch, server)
                started, started_cpu = time.perf_counter(), time.thread_time()
                own = Path(tempfile.mkdtemp(dir=scratch))
                hybrid = embedding.hybrid_log(conversation / "daily", store, own)
                embedding.seconds += time.perf_counter() - started
                embedding.cpu_seconds += time.thread_time() - started_cpu
                embedding.lines += line_count(hybrid)
                rankers["hybrid_search"] = partial(daily_search, hybrid)
            half = "tuned" if conversation.name in TUNED_ON else "held out"
            for question in questions(conversation):
                asked[question.category] += 1
                asked_by_half[half] += 1
                for name, rank in rankers.items():
                    started, started_cpu = time.perf_counter(), time.thread_time()
                    lines = rank(question.text)
                    latencies[name].append(time.perf_counter() - started)
                    cpu[name].append(time.thread_time() - started_cpu)
                    for k in KS:
                        if question.evidence & set(lines[:k]):
                            found[(name, question.category)][k] += 1
                            by_half[(name, half)][k] += 1
    ran = [name for name in RANKERS if latencies[name]]

    def share(name: str, categories: Iterable[int]) -> dict[str, float]:
        asked_here = list(categories)
        n = sum(asked[c] for c in asked_here)
        return {f"k{k}": round(sum(found[(name, c)][k] for c in asked_here) / n, 4) for k in KS}

    def latency(name: str, measured: dict[str, list[float]]) -> dict[str, float]:
        ms = [1000 * seconds for seconds in measured[name]]
        return {
            "p50": round(statistics.median(ms), 3),
            "p99": round(percentile(ms, 0.99), 3),
            "mean": round(statistics.fmean(ms), 3),
        }

    def share_of_half(name: str, half: str) -> dict[str, float]:
        return {f"k{k}": round(by_half[(name, half)][k] / asked_by_half[half], 4) for k in KS}

    halves = [half for half in ("tuned", "held out") if asked_by_half[half]]
    total = asked.total()
    results = {
        "data": str(root),
        "store": "sqlite" if server is None else "postgresql",
        "conversations": [p.name for p in conversations],
        "questions": total,
        **{name: share(name, asked) for name in ran},
        "by_category": {
            str(category): {
                "questions": asked[category],
                **{name: share(name, [category]) for name in ran},
            }
            for category in sorted(asked)
        },
        "by_half": {
            half: {
                "conversations": [
                    p.name for p in conversations if (p.name in TUNED_ON) == (half == "tuned")
                ],
                "questions": asked_by_half[half],
                **{name: share_of_half(name, half) for name in ran},
            }
            for half in halves
        },
        "latency_ms": {name: latency(name, latencies) for name in ran},
        "cpu_ms": {name: latency(name, cpu) for name in ran},
        "embedding": None
        if embedding is None
        else {
            "lines": embedding.lines,
            "lines_per_second": round(embedding.lines / embedding.seconds, 1),
            "lines_per_cpu_second": round(embedding.lines / embedding.cpu_seconds, 1),
            "model_load_seconds": round(embedding.model_seconds, 2),
            "model_rss_mb": round(embedding.model_rss_mb, 1),
        },
        "rss_mb": round(rss_mb(), 1),
        "load_average": os.getloadavg()[0],
    }
    results_file.parent.mkdir(parents=True, exist_ok=True)
    results_file.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")

    print(f"LoCoMo dev: {total} questions (categories 1-4 with evidence), {results['store']}")
    print(f"{'':24}{'k=5':>8}{'k=10':>8}{'p50 ms':>10}{'p99 ms':>10}{'cpu p50':>10}{'cpu p99':>10}")
    for name in ran:
        at, ms, cpu_ms = share(name, asked), latency(name, latencies), latency(name, cpu)
        print(
            f"{RANKERS[name]:24}{at['k5']:>8.3f}{at['k10']:>8.3f}{ms['p50']:>10.2f}"
            f"{ms['p99']:>10.2f}{cpu_ms['p50']:>10.2f}{cpu_ms['p99']:>10.2f}"
        )
    for half in halves:
        at_half = "  ".join(
            f"{name.split('_')[0]} {share_of_half(name, half)['k5']:.3f}/"
            f"{share_of_half(name, half)['k10']:.3f}"
            for name in ran
        )
        print(f"{half} half ({asked_by_half[half]} questions), k=5/k=10: {at_half}")
    if embedding is None:
        print("hybrid: not run (pip install 'cambium-memory[semantic]')")
    else:
        print(
            f"embedding: {embedding.lines} lines at {embedding.lines / embedding.seconds:.0f} "
            f"lines/s ({embedding.lines / embedding.cpu_seconds:.0f} per CPU second); "
            f"model loaded in {embedding.model_seconds:.1f} s, "
            f"+{embedding.model_rss_mb:.0f} MB RSS; process RSS {rss_mb():.0f} MB"
        )
    print(
        f"load average {os.getloadavg()[0]:.1f}: p50/p99 are wall-clock, cpu the CPU time of "
        "the searching thread (closer to an idle machine's latency when the load is high)"
    )
    print(f"written to {results_file.relative_to(REPOSITORY)}")


if __name__ == "__main__":
    main()
