"""recall at scale: three years of a heavy user's notes, grown in three steps.

The corpus is generated here, at bench time, from LoCoMo's dev conversations
(``../shared/bench/locomo-dev``; never copied into the repository): 911 lines a day (the
last week live, the rest archived, as the nightly consolidation leaves them), drawn from the
conversations' lines with a made-up word now and then so the vocabulary keeps growing as a
life's does; one mark per ten lines over 1,000 subjects, each citing a line of its day and
saying something a conversation said; 100 substrate files. At 1,002,100 lines that is 1,100
daily files, 100,000 marks and about 144 MB of notes, the figures of issue 24.

At each size (10k, 100k and 1M lines), in this order, on the real daemon and CLI:

- the index built from scratch by ``cambium index rebuild`` (the whole process; its
  progress lines counted);
- the daemon started on that up-to-date index (spawn to ``GET /v1/health`` 200), its first
  free-text recall over all four layers, then, once health says the start's preparation of
  the index is done (``"index": "ready"``), 200 more (LoCoMo's questions) over the socket:
  p50/p99 and the daemon's CPU per recall; beside them, in alternating blocks of 25, the raw
  FTS5 ``bm25`` query with every term of the same questions (plain ``sqlite3``, the same
  database); then 20 recalls each after a second of idling, beside a fixed memory walk
  timed back to back and after the same idling (what the machine itself charges for it);
  at the largest size, 10 more each after a pause longer than the daemon's interval between
  looks for hand-edited daily files (a person's recalls come so), alternately with 10 after
  a second, each on a new connection (the server closes one idle for 5 s);
- ``cambium memory recall`` as a whole process with the daemon up and with it down, and
  ``grep -rliE`` over the same daily files, for the same questions;
- the daemon's RSS after those recalls; at the largest size, again after 40,000
  observations over the socket and 50 more recalls;
- at the largest size, the same store with semantic recall on, while its worker embeds
  (:mod:`bench.recall_semantic`).

    .venv/bin/python -m bench.recall_scale [--lines 10000,100000,1002100]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from bench.harness import (
    SUBJECTS,
    UnixHTTP,
    post_signals,
    process_cpu,
    scratch,
    wait_drained,
    whole_process,
)
from bench.report import Figure, Part, at_most, percentiles, publish
from daemon.config_file import DEFAULT_TIMEZONE
from daemon.core.records import Mark
from daemon.search.daily import CANDIDATES
from daemon.search.text import terms
from daemon.services.recall import HAND_EDITS_LOOK
from daemon.store import Store, Tx
from daemon.store.migrate import upgrade
from daemon.testing import CAMBIUM, DaemonHome

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo-dev"
SIZES = (10_000, 100_000, 1_002_100)
LINES_PER_DAY = 911
LINES_PER_MARK = 10
LIVE_DAYS = 7
SUBSTRATE_FILES = 100
QUERIES = 200
COMMANDS = 5  # whole-process recalls (and greps) at each size
SIGNALS = 40_000  # at the largest size: RSS must stay flat over them
BATCH = 5_000
BLOCK = 25  # recalls, then as many raw queries, alternately
IDLE = 1.0  # seconds before each of the after-idle recalls
# At the largest size, seconds before each of a few recalls: longer than the daemon's
# interval between looks for hand-edited daily files, which it takes only after a change.
PAUSE = HAND_EDITS_LOOK + 1.0
PAUSED = 10
# The notes end on the day the bench runs, in the daemon's zone: recall's default horizon
# (the last 7 days of the daily layer) then holds a week of lines on any day. (Until
# 2026-12-08 the last day was fixed at 2026-11-30, so the window held fewer days each day
# the bench ran later, and none from 2026-12-08 on.)
NOW = datetime.now(UTC)
TODAY = NOW.astimezone(ZoneInfo(DEFAULT_TIMEZONE)).date()

RAW_FTS = "SELECT rowid FROM text_fts_daily WHERE text_fts_daily MATCH ? ORDER BY rank LIMIT ?"


class Corpus:
    """LoCoMo's lines and questions, and lines made from them."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines = [
            line
            for path in sorted(LOCOMO.glob("*/daily/*.md"))
            for line in path.read_text(encoding="utf-8").splitlines()
            if ": " in line
        ]
        self.questions = [
            item["question"]
            for path in sorted(LOCOMO.glob("*/qa.json"))
            for item in json.loads(path.read_text(encoding="utf-8"))
        ]
        syllables = ["ka", "lo", "mi", "ren", "sa", "tu", "vel", "dor", "pin", "gra", "fe", "nos"]
        self.words = [
            "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(20_000)
        ]

    def line(self) -> str:
        line = self.rng.choice(self.lines)
        if self.rng.random() < 0.3:
            line += f" ({self.rng.choice(self.words)})"
        return line


def days_of(lines: int) -> list[date]:
    count = -(-lines // LINES_PER_DAY)
    return [TODAY - timedelta(days=n) for n in range(count)]


def write_files(home: DaemonHome, lines: int, corpus: Corpus) -> None:
    daily = home.root / "memory" / "daily"
    (daily / "archive").mkdir(parents=True, exist_ok=True)
    left = lines
    for day in days_of(lines):
        count = min(LINES_PER_DAY, left)
        left -= count
        live = day > TODAY - timedelta(days=LIVE_DAYS)
        folder = daily if live else daily / "archive"
        text = "\n".join(corpus.line() for _ in range(count)) + "\n"
        (folder / f"{day.isoformat()}.md").write_text(text, encoding="utf-8")
    for n in range(SUBSTRATE_FILES):
        text = "\n".join([f"# Note {n}", *(corpus.line() for _ in range(40))]) + "\n"
        (home.substrate / f"note-{n:03d}.md").write_text(text, encoding="utf-8")


def subject(n: int) -> str:
    return f"user.area{n // 20}.topic{n % 20}"


def make_marks(count: int, days: list[date], corpus: Corpus) -> Iterator[Mark]:
    rng = corpus.rng
    for n in range(count):
        observed = NOW - timedelta(seconds=rng.uniform(0, len(days) * 86_400))
        line = rng.randint(1, LINES_PER_DAY)
        yield Mark(
            id=f"mk_bench_{n:06d}",
            workspace_id="default",
            subject=subject(n % SUBJECTS),
            observation=corpus.line().split(": ", 1)[1],
            evidence={
                "daily_file": f"{rng.choice(days).isoformat()}.md",
                "line_range": [line, line],
                "signal_ids": [f"sig{n}"],
            },
            initial_strength=0.7,
            half_life_days=365.0,
            observed_by="bench",
            first_observed_at=observed,
            last_reinforced_at=observed,
            created_at=observed,
            updated_at=observed,
        )


def _insert(marks: list[Mark], tx: Tx) -> None:
    tx.marks.insert(marks)


def build(home: DaemonHome, lines: int, corpus: Corpus) -> None:
    """The files, and a store at the schema's head holding the marks (not yet indexed)."""
    write_files(home, lines, corpus)
    url = f"sqlite:///{home.root / 'cambium.db'}"
    upgrade(url)
    store = Store(url)
    marks = list(make_marks(lines // LINES_PER_MARK, days_of(lines), corpus))
    for start in range(0, len(marks), BATCH):
        store.write_sync(partial(_insert, marks[start : start + BATCH]))
    store.close()


def cli(home: DaemonHome, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [CAMBIUM, *args, "--config", str(home.config)]
    return subprocess.run(argv, env=home.env(), capture_output=True, text=True, check=True)


def medians(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """Median wall and CPU milliseconds of whole-process runs."""
    return (
        statistics.median(wall for wall, _ in runs) * 1000,
        statistics.median(cpu for _, cpu in runs) * 1000,
    )


def commands(home: DaemonHome, questions: list[str]) -> tuple[float, float]:
    def recall(question: str) -> Callable[[], object]:
        return lambda: cli(home, "memory", "recall", question)

    return medians([whole_process(recall(question)) for question in questions])


def grep(home: DaemonHome, questions: list[str]) -> float:
    """Median milliseconds of ``grep -rliE`` for any of a question's words."""
    runs = []
    for question in questions:
        pattern = "|".join(word for word in question.rstrip("?").split() if len(word) > 3)
        argv = ["grep", "-rliE", pattern, str(home.root / "memory" / "daily")]
        runs.append(whole_process(partial(subprocess.run, argv, stdout=subprocess.DEVNULL)))
    return medians(runs)[0]


class Recalls:
    """Free-text recall over the daemon's socket, and the raw FTS5 query beside it."""

    def __init__(self, home: DaemonHome) -> None:
        self.home = home
        self.http = UnixHTTP(home.socket)
        self.raw = sqlite3.connect(home.root / "cambium.db")

    def recall(self, question: str) -> float:
        started = time.perf_counter()
        status, body = self.http.request("GET", "/v1/recall?" + urlencode({"about": question}))
        if status != 200:
            raise RuntimeError(f"recall: {status} {body[:200]!r}")
        return (time.perf_counter() - started) * 1000

    def raw_fts(self, question: str) -> float:
        match = " OR ".join(f'"{term}"' for term in dict.fromkeys(terms(question)))
        started = time.perf_counter()
        self.raw.execute(RAW_FTS, (match, CANDIDATES)).fetchall()
        return (time.perf_counter() - started) * 1000

    def until_prepared(self, poll: float = 0.05) -> None:
        """Until the daemon's health says its start-up preparation of the index is done."""
        while self.http.json("/v1/health")["index"] != "ready":
            time.sleep(poll)

    def blocks(self, questions: list[str]) -> tuple[list[float], list[float], float]:
        """The questions recalled and queried raw in alternating blocks of ``BLOCK`` (so
        the machine's drift falls on both alike, while neither evicts what the other had
        just warmed: a raw query scans for up to a second); the daemon's CPU ms per recall."""
        assert self.home.process is not None
        pid = self.home.process.pid
        recalls, raws, cpu = [], [], 0.0
        for start in range(0, len(questions), BLOCK):
            block = questions[start : start + BLOCK]
            self.reconnect()  # the raw block may outlast the server's keep-alive (5 s)
            before = process_cpu(pid)
            recalls += [self.recall(question) for question in block]
            cpu += process_cpu(pid) - before
            raws += [self.raw_fts(question) for question in block]
        return recalls, raws, cpu / len(questions) * 1000

    def after_idle(self, questions: list[str]) -> list[float]:
        """Each question recalled after ``IDLE`` seconds of nothing."""
        latencies = []
        self.reconnect()
        for question in questions:
            time.sleep(IDLE)
            latencies.append(self.recall(question))
        return latencies

    def after_pauses(self, questions: list[str]) -> tuple[list[float], list[float]]:
        """Pairs of questions, one recalled after ``PAUSE`` seconds of nothing, the other
        after ``IDLE``, alternately, each on a new connection (the server closes one idle
        for 5 s): (after the pause, after the idle second)."""
        paused: list[float] = []
        idle: list[float] = []
        for first, second in zip(questions[::2], questions[1::2], strict=False):
            for wait, latencies, question in ((PAUSE, paused, first), (IDLE, idle, second)):
                time.sleep(wait)
                self.reconnect()  # (not timed)
                latencies.append(self.recall(question))
        return paused, idle

    def reconnect(self) -> None:
        self.http.close()
        self.http = UnixHTTP(self.home.socket)

    def close(self) -> None:
        self.http.close()
        self.raw.close()


def idle_penalty(rounds: int = 20) -> tuple[float, float]:
    """The machine's own cost of idling, on a fixed workload that reads memory as a recall
    does (a walk over 100,000 dictionary entries, a few ms): median ms back to back, and
    after ``IDLE`` seconds of sleep. On these virtual machines what a process had in the
    CPU's caches is gone after a second asleep, and work that reads memory takes longer;
    pure arithmetic does not slow."""
    table = {n: str(n) * 5 for n in range(200_000)}

    def walk() -> float:
        started = time.perf_counter()
        sum(len(table[n]) for n in range(0, 200_000, 2))
        return (time.perf_counter() - started) * 1000

    back_to_back = [walk() for _ in range(rounds)]
    asleep = []
    for _ in range(rounds):
        time.sleep(IDLE)
        asleep.append(walk())
    return statistics.median(back_to_back), statistics.median(asleep)


def growth(home: DaemonHome, recalls: Recalls, questions: list[str], rss: float) -> list[Figure]:
    """The daemon's RSS growth over ``SIGNALS`` observations (and ``questions`` recalled
    after them), twice: the first run warms the store's page caches and the allocator."""
    figures = []
    for start, run in ((0, "first"), (SIGNALS, "next")):
        post_signals(home.socket, iter(range(start, start + SIGNALS)), 8)
        wait_drained(home.socket)
        recalls.reconnect()  # the server closed the idle kept-alive connection
        for question in questions:
            recalls.recall(question)
        now = home.rss_mb()
        name = f"RSS growth over the {run} {SIGNALS:,} signals"
        figures.append(
            at_most(name, now - rss, 10, "MB") if run == "next" else Figure(name, now - rss, "MB")
        )
        rss = now
    return figures


def measure(lines: int, corpus: Corpus, largest: bool) -> list[Figure]:
    at = f"{lines:,} lines"
    questions = corpus.rng.sample(corpus.questions, QUERIES)
    few = questions[:COMMANDS]
    with scratch() as root:
        home = DaemonHome(root)
        build(home, lines, corpus)
        rebuilt: list[subprocess.CompletedProcess[str]] = []
        wall, cpu = whole_process(lambda: rebuilt.append(cli(home, "index", "rebuild")))
        cli(home, "index", "check")  # exits 1 (check=True raises) unless the index is current
        figures = [
            at_most(f"{at}: index build from scratch, cambium index rebuild", wall, 120, "s"),
            Figure(f"{at}: … its CPU", cpu, "s"),
            Figure(
                f"{at}: … progress lines it printed", len(rebuilt[0].stderr.splitlines()), "lines"
            ),
        ]
        offline = commands(home, few)
        spawned = time.monotonic()
        home.start(timeout=120)
        startup = home.startup_seconds  # (the semantic part below starts the home again)
        recalls = Recalls(home)
        try:
            first = recalls.recall(questions[0])
            recalls.until_prepared()
            prepared = time.monotonic() - spawned
            latencies, raws, cpu_ms = recalls.blocks(questions[1:])
            idle = recalls.after_idle(questions[1:21])
            paused, unpaused = (
                recalls.after_pauses(questions[21 : 21 + 2 * PAUSED]) if largest else ([], [])
            )
            walk, walk_idle = idle_penalty()
            online = commands(home, few)
            rss = home.rss_mb()
            grow: list[Figure] = []
            if largest:
                grow = growth(home, recalls, questions[:50], rss)
        finally:
            recalls.close()
            home.stop()
        p50, p99 = percentiles(latencies)
        raw50, raw99 = percentiles(raws)
        if largest:  # the same store again, semantic recall on and nothing embedded yet
            from bench import recall_semantic  # (it imports this module)

            grow += recall_semantic.measure(home, questions, (p50, p99))
        figures += [
            at_most(f"{at}: daemon start-up on the current index", startup, 3, "s"),
            at_most(f"{at}: first recall after start", first, 1000, "ms"),
            Figure(f"{at}: index prepared (health: ready), after spawning", prepared, "s"),
            at_most(f"{at}: warm recall, all layers, p50", p50, 20, "ms"),
            at_most(f"{at}: warm recall p99", p99, 50, "ms"),
            Figure(f"{at}: … the daemon's CPU per recall", cpu_ms, "ms"),
            Figure(f"{at}: recall after {IDLE:.0f} s idle, p50", statistics.median(idle), "ms"),
            *(
                [
                    Figure(
                        f"{at}: recall after a {PAUSE:.0f} s pause, new connection, p50",
                        statistics.median(paused),
                        "ms",
                    ),
                    Figure(
                        f"{at}: … after {IDLE:.0f} s, alternately with it",
                        statistics.median(unpaused),
                        "ms",
                    ),
                ]
                if paused
                else []
            ),
            Figure(f"{at}: … a fixed memory walk, back to back", walk, "ms"),
            Figure(f"{at}: … the same walk after {IDLE:.0f} s idle", walk_idle, "ms"),
            Figure(f"{at}: raw FTS5 bm25 (daily, {CANDIDATES} rows) p50 / p99", raw50, "ms"),
            Figure(f"{at}: raw FTS5 p99", raw99, "ms"),
            at_most(f"{at}: recall p99 / raw FTS5 p99", p99 / raw99, 3, "x"),
            at_most(
                f"{at}: cambium memory recall, daemon up (whole process)", online[0], 1000, "ms"
            ),
            at_most(f"{at}: cambium memory recall, daemon down", offline[0], 1500, "ms"),
            Figure(f"{at}: … their CPU, up / down", online[1], "ms"),
            Figure(f"{at}: … down", offline[1], "ms"),
            Figure(f"{at}: grep -rliE over the daily files", grep(home, few), "ms"),
            at_most(f"{at}: daemon RSS after the recalls", rss, 150, "MB"),
            *grow,
        ]
    return figures


def run(sizes: tuple[int, ...] = SIZES) -> Part:
    corpus = Corpus(random.Random(20261202))
    figures = []
    for lines in sizes:
        figures += measure(lines, corpus, largest=lines == max(sizes))
    return Part(
        "recall at scale",
        figures,
        {
            "lines": list(sizes),
            "lines_per_day": LINES_PER_DAY,
            "marks_per_line": 1 / LINES_PER_MARK,
            "substrate_files": SUBSTRATE_FILES,
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", default=",".join(map(str, SIZES)))
    sizes = tuple(int(n) for n in parser.parse_args().lines.split(","))
    publish("recall_scale", [run(sizes)])
