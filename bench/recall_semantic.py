"""Semantic recall at scale, while the background worker embeds: the part of
:mod:`bench.recall_scale` run on its largest store once the lexical figures are taken.

The same daemon home is started again with ``[recall] semantic = true`` and nothing
embedded yet (at 1M lines the start-up pass would take hours, so the worker is embedding
throughout):

- spawn to health 200, and the first recall;
- 150 free-text recalls in blocks of 50 once the worker has embedded for 30 s (so they
  have vectors to rank by meaning), p50 and p99, beside the same size's lexical recall
  measured just before (the goal: within it), and what was embedded before and after
  them (a burst of recalls holds the worker back);
- the daemon's RSS;
- a SIGKILL mid-embedding, then a start again: how many of the vectors stored before the
  kill are still the store's rows after the new worker has run a while (a vector computed
  again would be a new row), and how fast it embeds (``/v1/health``'s count, from 5 s on);
- SIGTERM while it embeds: the seconds to exit.
"""

from __future__ import annotations

import signal
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from bench.recall_scale import Recalls
from bench.report import Figure, at_most, percentiles
from daemon.testing import DaemonHome

SEMANTIC = "[recall]\nsemantic = true\n"
EMBED_FIRST = 30.0  # seconds the worker embeds before the recalls, so they have vectors to rank
BLOCKS = 3
PER_BLOCK = 50
RESUMED_SECONDS = 20.0  # how long the restarted worker runs before the stored rows are read
KILL_AFTER = 2.0  # seconds after the recalls, the SIGKILL
RATE_FROM = 5.0  # seconds after the restart: the worker's rate is counted from here on


def _stored(database: Path) -> tuple[int, int]:
    """How many vectors the store holds, and the highest row id."""
    with closing(sqlite3.connect(database)) as raw:
        query = "SELECT count(*), coalesce(max(id), 0) FROM dense_vectors"
        count, top = raw.execute(query).fetchone()
    return int(count), int(top)


def _kept(database: Path, top: int) -> int:
    with closing(sqlite3.connect(database)) as raw:
        found = raw.execute("SELECT count(*) FROM dense_vectors WHERE id <= ?", (top,)).fetchone()
    return int(found[0])


def _recalls(home: DaemonHome, questions: list[str]) -> tuple[float, list[float], list[int]]:
    """The first recall, then (after EMBED_FIRST s) the blocks' latencies, ms; how much was
    embedded before the blocks and after them."""
    with closing(Recalls(home)) as recalls:
        first = recalls.recall(questions[0])
        time.sleep(EMBED_FIRST)
        latencies: list[float] = []
        embedded: list[int] = []
        for start in range(1, 1 + BLOCKS * PER_BLOCK, PER_BLOCK):
            recalls.reconnect()
            if not embedded:
                embedded.append(int(recalls.http.json("/v1/health")["embedding"]["embedded"]))
            latencies += [recalls.recall(q) for q in questions[start : start + PER_BLOCK]]
        embedded.append(int(recalls.http.json("/v1/health")["embedding"]["embedded"]))
    return first, latencies, embedded


def _rate(home: DaemonHome) -> float:
    """Documents the worker embeds a second, from its health's count (from RATE_FROM s
    after the start to RESUMED_SECONDS)."""
    with closing(Recalls(home)) as health:
        time.sleep(RATE_FROM)
        counted = health.http.json("/v1/health")["embedding"]["embedded"]
        time.sleep(RESUMED_SECONDS - RATE_FROM)
        health.reconnect()  # the server closed the idle kept-alive connection
        now = health.http.json("/v1/health")["embedding"]["embedded"]
    return float(now - counted) / (RESUMED_SECONDS - RATE_FROM)


def measure(home: DaemonHome, questions: list[str], lexical: tuple[float, float]) -> list[Figure]:
    """``lexical``: the lexical recall's p50 and p99 at this size, in this run."""
    at = "semantic on"
    database = home.root / "cambium.db"
    home.extra_config = SEMANTIC
    home.write_config()
    try:
        home.start(timeout=120)
        startup = home.startup_seconds
        first, latencies, embedded = _recalls(home, questions)
        rss = home.rss_mb()
        time.sleep(KILL_AFTER)  # the worker, free again, is embedding
        home.stop(signal.SIGKILL)
        stored, top = _stored(database)
        home.start(timeout=120)
        rate = _rate(home)
        kept = _kept(database, top)
        after, _ = _stored(database)
        stopping = time.monotonic()
        home.stop()
        stopped = time.monotonic() - stopping
    finally:
        if home.process is not None:
            home.stop(signal.SIGKILL)
    p50, p99 = percentiles(latencies)
    return [
        Figure(f"{at}: daemon start-up, the model loaded, nothing embedded", startup, "s"),
        at_most(f"{at}: first recall after start", first, 1000, "ms"),
        at_most(f"{at}: recall while the worker embeds, p50 (lexical's)", p50, lexical[0], "ms"),
        at_most(f"{at}: … p99 (lexical's)", p99, lexical[1], "ms"),
        Figure(f"{at}: … documents embedded when they began", embedded[0], "documents"),
        Figure(f"{at}: … and when they ended (the worker holds back)", embedded[1], "documents"),
        at_most(f"{at}: daemon RSS while embedding", rss, 400, "MB"),
        Figure(f"{at}: vectors stored at the SIGKILL", stored, "vectors"),
        at_most(
            f"{at}: … of them computed again in the next {RESUMED_SECONDS:.0f} s",
            stored - kept,
            0,
            "vectors",
        ),
        Figure(f"{at}: … vectors stored by then", after, "vectors"),
        Figure(f"{at}: the worker's documents (lines, marks) embedded per second", rate, "/s"),
        at_most(f"{at}: SIGTERM while embedding, to exit", stopped, 5, "s"),
    ]
