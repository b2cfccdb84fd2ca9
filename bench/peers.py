"""A peer measured in the same rounds: huey's ``SqliteHuey``, a durable task queue on SQLite
(the optional ``bench`` extra).

Its pipeline end to end, as it is deployed: producer threads in this process enqueue one
task per observation (the same payload the bus gets) through one ``SqliteHuey``, and its
consumer runs in a process of its own — as the daemon does — and stores each task's result,
huey's durable effect of a task. Timed from the first enqueue until every result is stored.
The queue file has ``synchronous=FULL`` (huey's ``fsync=True``) in WAL mode, like the bus's
store, on the same disk. The consumer starts before each measurement and stops after it, so
it does not poll the disk while anything else is measured.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from huey import SqliteHuey

from bench.harness import Run, observation, on_threads
from bench.report import REPOSITORY

# The consumer's worker threads: the fastest of 1, 2, 4 and 8 here, in alternating rounds
# bracketed like the figures (1 reached about a third of 4's rate; 8 no more than 4), so the
# peer is measured at its best.
WORKERS = 4
STALL_SECONDS = 30.0  # no result stored for this long: the consumer is stuck or gone
POLL = 0.005


def observe(signal: dict[str, Any]) -> str:
    """The task: what it returns is stored as its result, durably."""
    return str(signal["payload"]["subject"])


def queue(path: Path) -> tuple[Any, Any]:
    """The queue in ``path`` and its one task (calling the task enqueues it)."""
    huey = SqliteHuey("bench", filename=str(path), fsync=True, results=True)
    return huey, huey.task()(observe)


def consume(path: str, workers: int) -> None:
    """Run the consumer until SIGTERM; it polls an empty queue every 1 to 10 ms, so the
    first task of a measurement is not left waiting for huey's default backoff (up to 10 s)."""
    huey, _ = queue(Path(path))
    consumer = huey.create_consumer(
        workers=workers,
        worker_type="thread",
        periodic=False,
        initial_delay=0.001,
        max_delay=0.01,
        check_worker_health=False,
    )
    consumer.run()


class HueyPipeline:
    """The producer side, kept across measurements; the consumer is started per measurement."""

    def __init__(self, path: Path, workers: int = WORKERS) -> None:
        self.path = path
        self.workers = workers
        self.huey, self.task = queue(path)

    def close(self) -> None:
        self.huey.storage.close()

    def measure(self, producers: int, seconds: float, numbers: Iterator[int]) -> Run:
        """Enqueue observations from ``producers`` threads for ``seconds``; the rate until
        every task's result is stored, and the latency of each enqueue."""
        consumer = self._start_consumer()
        try:
            self._warm_up()
            started = time.perf_counter()
            deadline = started + seconds

            def producer() -> list[float]:
                latencies = []
                while time.perf_counter() < deadline:
                    signal = observation(next(numbers))
                    sent = time.perf_counter()
                    self.task(signal)
                    latencies.append(time.perf_counter() - sent)
                return latencies

            latencies = [x for part in on_threads(producers, producer) for x in part]
            self._wait_for_results(len(latencies), consumer)
            run = Run(len(latencies), time.perf_counter() - started, latencies)
        finally:
            consumer.terminate()
            consumer.wait(timeout=10)
        self.huey.storage.flush_results()
        return run

    def _start_consumer(self) -> subprocess.Popen[bytes]:
        # Imported, not run as ``__main__``: huey names a task after its function's module.
        code = f"from bench.peers import consume; consume({str(self.path)!r}, {self.workers})"
        with (self.path.parent / "huey-consumer.log").open("ab") as log:
            return subprocess.Popen(
                [sys.executable, "-c", code],
                cwd=REPOSITORY,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )

    def _warm_up(self) -> None:
        """Until the consumer has executed a task (whose result is read, and so removed)."""
        self.task(observation(-1)).get(blocking=True, timeout=STALL_SECONDS)

    def _wait_for_results(self, count: int, consumer: subprocess.Popen[bytes]) -> None:
        stored, progressed = 0, time.perf_counter()
        while stored < count:
            if consumer.poll() is not None:
                raise RuntimeError(f"huey's consumer exited {consumer.returncode}")
            if time.perf_counter() - progressed > STALL_SECONDS:
                raise RuntimeError(f"huey stored {stored} of {count} results, then stalled")
            time.sleep(POLL)
            if (now := int(self.huey.result_count())) > stored:
                stored, progressed = now, time.perf_counter()
