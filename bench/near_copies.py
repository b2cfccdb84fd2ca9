"""What "no near-copies" costs the observation receptor: finding, for a batch of 100 new
observations, the marks they repeat, on a store that already holds 100,000 marks (100 under
each of 1,000 subjects, as ``bench.daemon`` leaves it), none of which the batch repeats (the
worst case: every look-up misses, so every subject's recent marks are compared).

- same words: the indexed fingerprint look-up alone (``[observation] similarity = 1``);
- near copies, read from the store: that plus the comparison with each subject's recent
  marks (the default, ``similarity = 0.9``), the marks read by the store's query (what a
  reader's transaction, or the writer's for a subject it does not know, pays);
- near copies, in the writer: the same batch in the writer's transaction, as the receptor
  runs it, once the writer's mirror of the subjects' recent marks
  (:mod:`daemon.store.recent_marks`) knows them (the batch is run there once first).

Medians of 15 rounds, the three taking turns.

    .venv/bin/python -m bench.near_copies
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime
from functools import partial

import anyio

from bench.harness import scratch
from bench.report import Figure, Part, main_for
from daemon.core.records import Mark
from daemon.store import Store, Tx
from daemon.store.migrate import upgrade
from receptors.near_copies import Wanted, near_copies

MARKS = 100_000
SUBJECTS = 1_000
BATCH = 100
ROUNDS = 15
T0 = datetime(2026, 4, 11, tzinfo=UTC)
SAME = "same words (fingerprint index), per observation"
READ = "near copies (threshold 0.9), the marks read from the store, per observation"
MIRRORED = "near copies (threshold 0.9), in the writer, its mirror warm, per observation"


def subject(n: int) -> str:
    return f"bench.area{n % SUBJECTS // 20}.topic{n % 20}"


def mark(n: int) -> Mark:
    return Mark(
        id=f"mk_{n}",
        workspace_id="default",
        subject=subject(n),
        observation=f"observation number {n} about this topic",
        evidence={"note": "bench"},
        initial_strength=0.7,
        half_life_days=14,
        observed_by="bench",
        first_observed_at=T0,
        last_reinforced_at=T0,
        created_at=T0,
        updated_at=T0,
    )


def insert(numbers: range, tx: Tx) -> None:
    tx.marks.insert([mark(n) for n in numbers])


def look_up(wanted: list[Wanted], threshold: float, tx: Tx) -> float:
    """Seconds to find what the batch repeats, in ``tx``."""
    started = time.perf_counter()
    found = near_copies(tx, wanted, threshold)
    seconds = time.perf_counter() - started
    assert not any(found), "nothing in the batch repeats a stored mark"
    return seconds


def in_writer(store: Store, wanted: list[Wanted]) -> float:
    job = partial(look_up, wanted, 0.9)
    anyio.run(store.write, job)  # the mirror learns the subjects
    return anyio.run(store.write, job)


def run() -> Part:
    with scratch() as root:
        url = f"sqlite:///{root / 'near-copies.db'}"
        upgrade(url)
        store = Store(url)
        store.start()
        try:
            for start in range(0, MARKS, 5_000):
                store.write_sync(partial(insert, range(start, start + 5_000)))
            timings: dict[str, list[float]] = {SAME: [], READ: [], MIRRORED: []}
            for round_ in range(ROUNDS):
                first = MARKS + round_ * BATCH
                wanted = [
                    Wanted("default", subject(n), f"observation number {n} about this topic")
                    for n in range(first, first + BATCH)
                ]
                timings[SAME].append(store.read_sync(partial(look_up, wanted, 1.0)))
                timings[READ].append(store.read_sync(partial(look_up, wanted, 0.9)))
                timings[MIRRORED].append(in_writer(store, wanted))
        finally:
            store.close()
    return Part(
        "near_copies",
        [
            Figure(name, statistics.median(samples) / BATCH * 1000, "ms")
            for name, samples in timings.items()
        ],
        {"marks": MARKS, "subjects": SUBJECTS, "batch": BATCH, "rounds": ROUNDS},
    )


if __name__ == "__main__":
    main_for(run)
