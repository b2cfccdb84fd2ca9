"""The daemon process: start-up time and memory.

- start-up: from spawning ``cambium run`` to the first ``GET /v1/health`` answered 200
  (polled every 5 ms), on a fresh directory, so it includes creating the database;
- idle RSS: VmRSS one second after ready;
- RSS after 100,000 observations emitted over the socket by 8 client threads and applied
  (health shows nothing pending), with the rate they were applied at.

    .venv/bin/python -m bench.daemon
"""

from __future__ import annotations

import time

from bench.harness import post_signals, scratch, wait_drained
from bench.report import Figure, Part, at_most, main_for
from daemon.testing import DaemonHome

SIGNALS = 100_000
CLIENTS = 8


def run() -> Part:
    with scratch() as root, DaemonHome(root) as daemon:
        time.sleep(1.0)
        idle = daemon.rss_mb()
        started = time.perf_counter()
        post_signals(daemon.socket, iter(range(SIGNALS)), CLIENTS)
        wait_drained(daemon.socket)
        seconds = time.perf_counter() - started
        loaded = daemon.rss_mb()
    return Part(
        "daemon",
        [
            Figure("start-up to ready", daemon.startup_seconds * 1000, "ms"),
            at_most("idle RSS", idle, 80, "MB"),
            Figure(f"RSS after {SIGNALS:,} signals", loaded, "MB"),
            Figure(
                f"{SIGNALS:,} signals over the socket, end to end", SIGNALS / seconds, "signals/s"
            ),
        ],
    )


if __name__ == "__main__":
    main_for(run)
