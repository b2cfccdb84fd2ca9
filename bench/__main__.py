"""``python -m bench`` (``make bench``): every part of the benchmark in one run, one table.

Each part also runs alone: ``python -m bench.bus``, ``bench.recall_scale``,
``bench.watcher``, ``bench.daemon``, ``bench.locomo`` and ``bench.extraction`` (which
also scores a configured model: ``--config``). Goals are reported beside the
figures, met or missed; none of them fails the run. The whole run takes a few minutes on
two CPUs, most of it the rounds of ``bench.bus`` and the 100,000 signals of
``bench.daemon``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from bench import bus, cli, daemon, extraction, locomo, recall_scale, watcher
from bench.report import Figure, Part, machine, publish, write_json


def locomo_part() -> Part:
    """LoCoMo recall quality, from the JSON that :func:`bench.locomo.main` writes."""
    locomo.main()
    results = json.loads(locomo.RESULTS.read_text(encoding="utf-8"))
    ours, baseline = results["daily_search"], results["bm25_baseline"]
    figures = [
        Figure("daily search recall@5", ours["k5"], ""),
        Figure("BM25 baseline recall@5", baseline["k5"], ""),
        Figure(
            "daily search recall@10",
            ours["k10"],
            "",
            f">= {baseline['k10']:.3f} (BM25 recall@10)",
            ours["k10"] >= baseline["k10"],
        ),
    ]
    hybrid = results.get("hybrid_search")
    if hybrid is not None:  # the semantic extra is installed
        cpu = results["cpu_ms"]["hybrid_search"]
        figures += [
            Figure(
                "hybrid daily search recall@5", hybrid["k5"], "", ">= 0.75", hybrid["k5"] >= 0.75
            ),
            Figure(
                "hybrid daily search recall@10", hybrid["k10"], "", ">= 0.85", hybrid["k10"] >= 0.85
            ),
            Figure("hybrid search CPU p50", cpu["p50"], "ms", "<= 10 ms", cpu["p50"] <= 10),
            Figure("hybrid search CPU p99", cpu["p99"], "ms", "<= 50 ms", cpu["p99"] <= 50),
            Figure("embedding", results["embedding"]["lines_per_second"], "lines/s"),
        ]
    return Part("locomo", figures, {"questions": results["questions"]})


PARTS: list[Callable[[], Part]] = [
    bus.run,
    recall_scale.run,
    watcher.run,
    daemon.run,
    cli.run,
    locomo_part,
    extraction.run,
]


def main() -> None:
    print("machine:", machine())
    parts = []
    for run in PARTS:
        started = time.perf_counter()
        part = run()
        write_json(part.name, [part])
        print(f"{part.name}: {time.perf_counter() - started:.0f} s", flush=True)
        parts.append(part)
    publish("summary", parts)


if __name__ == "__main__":
    main()
