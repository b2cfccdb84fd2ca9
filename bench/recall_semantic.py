"""Semantic recall at scale, while the background worker embeds: the part of
:mod:`bench.recall_scale` run on its largest store once the lexical figures are taken.

The same daemon home is started again with ``[recall] semantic = true`` and nothing
embedded yet (at 1M lines the start-up pass would take hours, so the worker is embedding
throughout):

- spawn to health 200, and the first recall;
- once the worker has embedded for 30 s (so there are vectors to rank by meaning), rounds
  of a block of free-text recalls with semantic recall on, while the worker embeds, and
  the same questions recalled lexically (the same home, started again with semantic
  recall off), alternately: p50 and p99 of each (the goal: within lexical recall's). The
  machine's speed drifts by a quarter between one daemon's minutes and the next's (the
  lexical p50 moved 22-32 ms between four starts), more than what is compared; paired
  rounds put the drift on both alike. And what was embedded before and after the first
  round (a burst of recalls holds the worker back);
- the daemon's RSS;
- a SIGKILL mid-embedding, then a start again: how many of the vectors stored before the
  kill are still the store's rows after the new worker has run a while (a vector computed
  again would be a new row), and how fast it embeds (``/v1/health``'s count, from 5 s on);
- SIGTERM while it embeds: the seconds to exit;
- started again until every mark is embedded (the worker embeds the marks first; at 1M
  lines, 100,000 of them, a few minutes), then rounds as above: the marks' side of
  semantic recall at the size it reaches in a person's daemon, the lines still embedding.
"""

from __future__ import annotations

import signal
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from bench.recall_scale import Recalls
from bench.report import Figure, at_most, percentiles
from daemon.testing import DaemonHome

SEMANTIC = "[recall]\nsemantic = true\n"
EMBED_FIRST = 30.0  # seconds the worker embeds before the recalls, so they have vectors to rank
ROUNDS = 4  # an even number: the last block is semantic
PER_BLOCK = 40
WARM = 20  # recalls after each start before a block (not counted): the caches fill
RESUMED_SECONDS = 20.0  # how long the restarted worker runs before the stored rows are read
KILL_AFTER = 2.0  # seconds after the recalls, the SIGKILL
RATE_FROM = 5.0  # seconds after the restart: the worker's rate is counted from here on
SETTLED_ROUNDS = 2
EVERY_MARK_WITHIN = 900.0  # seconds: a bound for a busy machine, not a speed goal


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


def _block(home: DaemonHome, questions: list[str], warm: list[str]) -> list[float]:
    """The latencies of ``questions``, ms, after ``warm`` (not counted)."""
    with closing(Recalls(home)) as recalls:
        for question in warm:
            recalls.recall(question)
        return [recalls.recall(question) for question in questions]


def _start(home: DaemonHome, config: str) -> None:
    home.extra_config = config
    home.write_config()
    home.start(timeout=120)


def _paired(
    home: DaemonHome, questions: list[str]
) -> tuple[float, float, list[float], list[float], list[int]]:
    """Start-up and first recall with semantic recall on; after EMBED_FIRST s, ROUNDS
    rounds of a block each way (:func:`_rounds`), and what was embedded before the first
    semantic block and after it. The semantic daemon is left running."""
    _start(home, SEMANTIC)
    startup = home.startup_seconds
    with closing(Recalls(home)) as recalls:
        first = recalls.recall(questions[0])
    time.sleep(EMBED_FIRST)
    embedded = [_embedded(home)]

    def after_the_first_block() -> None:  # (a semantic one)
        if len(embedded) == 1:
            embedded.append(_embedded(home))

    semantic, lexical = _rounds(home, questions, ROUNDS, after_the_first_block)
    return startup, first, semantic, lexical, embedded


def _rounds(
    home: DaemonHome, questions: list[str], rounds: int, after_block: Callable[[], object]
) -> tuple[list[float], list[float]]:
    """``rounds`` rounds of a block each way on the running semantic daemon, in the order
    semantic, lexical, lexical, semantic, … (so a steady drift falls on both alike): the
    semantic and lexical latencies (ms). ``after_block`` is called after each block; the
    semantic daemon is left running."""
    warm = questions[-WARM:]
    latencies: dict[bool, list[float]] = {True: [], False: []}
    running = True
    for round_ in range(rounds):
        block = questions[1 + round_ * PER_BLOCK : 1 + (round_ + 1) * PER_BLOCK]
        for semantic in (True, False) if round_ % 2 == 0 else (False, True):
            if semantic != running:
                home.stop()
                _start(home, SEMANTIC if semantic else "")
                running = semantic
            latencies[semantic] += _block(home, block, warm)
            after_block()
    assert running, "the rounds end with the semantic daemon"
    return latencies[True], latencies[False]


def _every_mark_embedded(home: DaemonHome, database: Path) -> float:
    """Start the semantic daemon and wait until it has embedded as many documents as the
    store has marks: the seconds it took."""
    with closing(sqlite3.connect(database)) as raw:
        marks = int(raw.execute("SELECT count(*) FROM memory_marks").fetchone()[0])
    _start(home, SEMANTIC)
    started = time.monotonic()
    while _embedded(home) < marks:
        if time.monotonic() - started > EVERY_MARK_WITHIN:
            raise RuntimeError(f"fewer than {marks} documents embedded in {EVERY_MARK_WITHIN} s")
        time.sleep(2.0)
    return time.monotonic() - started


def _embedded(home: DaemonHome) -> int:
    with closing(Recalls(home)) as health:
        return int(health.http.json("/v1/health")["embedding"]["embedded"])


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
    """``lexical``: the lexical recall's p50 and p99 at this size, earlier in this run."""
    at = "semantic on"
    database = home.root / "cambium.db"
    try:
        startup, first, latencies, paired, embedded = _paired(home, questions)
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
        settling = _every_mark_embedded(home, database)
        settled, settled_paired = _rounds(home, questions, SETTLED_ROUNDS, lambda: None)
        home.stop()
    finally:
        if home.process is not None:
            home.stop(signal.SIGKILL)
    p50, p99 = percentiles(latencies)
    lexical50, lexical99 = percentiles(paired)
    settled50, settled99 = percentiles(settled)
    settled_lexical50, settled_lexical99 = percentiles(settled_paired)
    blocks = f"{ROUNDS} blocks of {PER_BLOCK}"
    every_mark = f"{at}, every mark embedded"
    return [
        Figure(f"{at}: daemon start-up, the model loaded, nothing embedded", startup, "s"),
        at_most(f"{at}: first recall after start", first, 1000, "ms"),
        at_most(f"{at}: recall while the worker embeds, {blocks}, p50", p50, lexical50, "ms"),
        at_most(f"{at}: … p99", p99, lexical99, "ms"),
        Figure(f"{at}: lexical recall, the blocks between them, p50", lexical50, "ms"),
        Figure(f"{at}: … its p99", lexical99, "ms"),
        Figure(f"{at}: lexical recall earlier in this run (above), p50", lexical[0], "ms"),
        Figure(f"{at}: … its p99", lexical[1], "ms"),
        Figure(f"{at}: documents embedded when the first block began", embedded[0], "documents"),
        Figure(f"{at}: … and when it ended (the worker holds back)", embedded[1], "documents"),
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
        Figure(f"{every_mark}: started again, until then", settling, "s"),
        at_most(
            f"{every_mark}: recall, {SETTLED_ROUNDS} blocks of {PER_BLOCK}, p50",
            settled50,
            settled_lexical50,
            "ms",
        ),
        at_most(f"{every_mark}: … p99", settled99, settled_lexical99, "ms"),
        Figure(
            f"{every_mark}: lexical recall, the blocks between them, p50", settled_lexical50, "ms"
        ),
        Figure(f"{every_mark}: … its p99", settled_lexical99, "ms"),
    ]
