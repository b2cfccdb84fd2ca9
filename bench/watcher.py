"""The substrate watcher: how soon an edit to a substrate file shows in recall.

With the real daemon running, a substrate file is rewritten with a word it never held
before, 20 times; after each write, ``GET /v1/recall?layers=substrate`` is polled every
5 ms until the word is found. The time from the end of the write to the first answer that
has it is the latency (so it includes up to one polling interval).

    .venv/bin/python -m bench.watcher
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from bench.harness import UnixHTTP, scratch
from bench.report import Figure, Part, at_most, main_for
from daemon.testing import DaemonHome

EDITS = 20
POLL = 0.005
TIMEOUT = 10.0
SETTLE = 0.2  # between edits, so each edit is an event of its own


def visible(client: UnixHTTP, word: str, file: Path) -> bool:
    status, body = client.request("GET", f"/v1/recall?about={word}&layers=substrate")
    if status != 200:
        raise RuntimeError(f"recall: {status} {body[:200]!r}")
    return any(hit["file"] == str(file) for hit in json.loads(body)["substrate"])


def edit_latencies(daemon: DaemonHome) -> list[float]:
    file = daemon.substrate / "lessons.md"
    for n in range(10):  # the rest of the substrate, so the search is not trivial
        (daemon.substrate / f"other-{n}.md").write_text(f"# Other {n}\n\nNothing new here.\n")
    client = UnixHTTP(daemon.socket)
    latencies = []
    try:
        for n in range(EDITS):
            word = f"quillwort{n}"
            file.write_text(f"# Lessons\n\nEdit {n}: remember the {word}.\n", encoding="utf-8")
            written = time.perf_counter()
            while not visible(client, word, file):
                if time.perf_counter() - written > TIMEOUT:
                    raise RuntimeError(f"edit {n} not visible after {TIMEOUT} s")
                time.sleep(POLL)
            latencies.append(time.perf_counter() - written)
            time.sleep(SETTLE)
    finally:
        client.close()
    return latencies


def run() -> Part:
    with scratch() as root, DaemonHome(root) as daemon:
        latencies = edit_latencies(daemon)
    median_ms = statistics.median(latencies) * 1000
    return Part(
        "watcher",
        [
            at_most("edit visible in recall, median", median_ms, 300, "ms"),
            Figure("edit visible in recall, max", max(latencies) * 1000, "ms"),
        ],
        {"latencies_ms": [round(x * 1000, 1) for x in latencies]},
    )


if __name__ == "__main__":
    main_for(run)
