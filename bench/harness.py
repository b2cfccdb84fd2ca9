"""What the benchmark parts share: a scratch directory on the repository's disk, a lean
HTTP client for the daemon's Unix socket, and the load it is put under. The daemon itself is
started with the tests' harness, :class:`daemon.testing.DaemonHome`.

The scratch directory lives under ``bench/results`` (git-ignored), not in the system temp
directory, which may be a RAM disk where fsync costs nothing and the figures would lie.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bench.report import RESULTS

SUBJECTS = 1_000

T = TypeVar("T")


@contextmanager
def scratch() -> Iterator[Path]:
    """A fresh directory on the same disk as the repository, removed afterwards."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="scratch-", dir=RESULTS))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def observation(n: int) -> dict[str, Any]:
    """Signal number ``n``: an observation about one of 1,000 subjects, saying something no
    other signal says, so each makes a mark of its own (no reinforcement short cut)."""
    return {
        "type": "memory.observation",
        "source_id": "bench",
        "payload": {
            "subject": f"bench.area{n % SUBJECTS // 20}.topic{n % 20}",
            "observation": f"observation number {n} about this topic",
            "evidence": {"note": "benchmark"},
        },
    }


class UnixHTTP:
    """A minimal HTTP/1.1 keep-alive client over a Unix socket. The load generator shares
    two CPUs with the server it measures, so it must cost far less per request than the
    server does (httpx costs several times more than this)."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.reader = self.sock.makefile("rb")

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def request(self, method: str, target: str, body: bytes = b"") -> tuple[int, bytes]:
        head = (
            f"{method} {target} HTTP/1.1\r\nhost: cambium\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        self.sock.sendall(head.encode() + body)
        status_line = self.reader.readline()
        if not status_line:
            raise ConnectionError("the daemon closed the connection")
        length = 0
        while (line := self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        return int(status_line.split()[1]), self.reader.read(length)

    def json(self, target: str) -> Any:
        status, body = self.request("GET", target)
        if status != 200:
            raise RuntimeError(f"GET {target}: {status} {body[:200]!r}")
        return json.loads(body)


def process_cpu(pid: int) -> float:
    """CPU seconds (user and system, every thread) process ``pid`` has spent so far."""
    # Fields after the command name (which may hold spaces): utime and stime are 12, 13.
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def whole_process(run: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of ``run``, which starts a child process and waits for it (its
    CPU is the children's, counted at their exit)."""

    def children() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    cpu, started = children(), time.perf_counter()
    run()
    return time.perf_counter() - started, children() - cpu


def wait_drained(socket: Path, poll: float = 0.01) -> None:
    """Until the daemon's health shows no pending delivery."""
    client = UnixHTTP(socket)
    try:
        while client.json("/v1/health")["deliveries"]["pending"]:
            time.sleep(poll)
    finally:
        client.close()


@dataclass(frozen=True)
class Run:
    """One measurement: ``count`` operations done in ``seconds``, with the latency of each
    where it was timed (empty where only the rate matters), and the CPU time the measured
    process spent on them (user and system, every thread; None where not measured)."""

    count: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    cpu: float | None = None
    # A baseline measured paired with this run (alternately, in the same seconds).
    baseline: Run | None = None

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    @property
    def cpu_ms(self) -> float | None:
        """CPU milliseconds per operation."""
        return None if self.cpu is None else self.cpu / self.count * 1000


def on_threads(clients: int, work: Callable[[], T]) -> list[T]:
    """``work`` run on ``clients`` threads at once; what each returned."""
    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(lambda _: work(), range(clients)))


def post_signals(
    path: Path, numbers: Iterator[int], clients: int, until: float = math.inf
) -> list[float]:
    """POST observation ``n`` for each ``n`` drawn from ``numbers`` (shared by ``clients``
    threads, each on its own keep-alive connection) until ``numbers`` runs out or
    :func:`time.perf_counter` reaches ``until``; the acknowledgement latency of each, in
    seconds."""

    def client() -> list[float]:
        connection = UnixHTTP(path)
        latencies = []
        try:
            # next() of a shared iterator is atomic under the GIL: each number is sent once.
            while time.perf_counter() < until and (n := next(numbers, None)) is not None:
                body = json.dumps(observation(n)).encode()
                sent = time.perf_counter()
                status, answer = connection.request("POST", "/v1/signals", body)
                latencies.append(time.perf_counter() - sent)
                if status != 201:
                    raise RuntimeError(f"POST /v1/signals: {status} {answer[:200]!r}")
        finally:
            connection.close()
        return latencies

    return [latency for part in on_threads(clients, client) for latency in part]


def get_requests(path: Path, target: str, clients: int, seconds: float, expect: int = 200) -> Run:
    """The requests for ``target`` that ``clients`` threads get answered in ``seconds``."""
    deadline = time.perf_counter() + seconds

    def client() -> int:
        connection = UnixHTTP(path)
        done = 0
        try:
            while time.perf_counter() < deadline:
                status, answer = connection.request("GET", target)
                if status != expect:
                    raise RuntimeError(f"GET {target}: {status} {answer[:200]!r}")
                done += 1
        finally:
            connection.close()
        return done

    started = time.perf_counter()
    done = sum(on_threads(clients, client))
    return Run(done, time.perf_counter() - started)
