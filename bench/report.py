"""Figures, goals and where they go: a table on stdout and JSON under ``bench/results``.

A part of the benchmark returns a :class:`Part`: its figures (each optionally with a goal
and whether it was met) and any raw details worth keeping. Goals are reported, never
asserted: a missed goal is a finding, not a failure of the run.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
RESULTS = REPOSITORY / "bench" / "results"


@dataclass(frozen=True)
class Figure:
    name: str
    value: float
    unit: str
    goal: str = ""
    met: bool | None = None  # None: no goal

    def shown(self) -> str:
        if self.unit == "x":
            return f"{self.value:.2f}x"
        if not self.unit:  # a share
            return f"{self.value:.3f}"
        digits = 0 if abs(self.value) >= 100 else 1 if abs(self.value) >= 10 else 2
        return f"{self.value:,.{digits}f} {self.unit}"

    def verdict(self) -> str:
        return "" if self.met is None else "met" if self.met else "MISSED"


def _bound(relation: str, bound: float, unit: str) -> str:
    return f"{relation} {bound:g}" + ("x" if unit == "x" else f" {unit}")


def at_least(name: str, value: float, floor: float, unit: str = "x") -> Figure:
    return Figure(name, value, unit, _bound(">=", floor, unit), value >= floor)


def at_most(name: str, value: float, ceiling: float, unit: str) -> Figure:
    return Figure(name, value, unit, _bound("<=", ceiling, unit), value <= ceiling)


@dataclass
class Part:
    name: str
    figures: list[Figure]
    details: dict[str, Any] = field(default_factory=dict)


def percentiles(samples: Sequence[float]) -> tuple[float, float]:
    """p50 and p99 (inclusive method) of ``samples``, which must hold at least two values."""
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49], cuts[98]


def commit() -> str | None:
    """The commit measured (read only), so figures can be told apart as the code moves."""
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip() if found.returncode == 0 else None


def machine() -> dict[str, Any]:
    return {
        "commit": commit(),
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def print_table(parts: Sequence[Part]) -> None:
    rows = [("figure", "value", "goal", "")]
    for part in parts:
        rows += [(f"{part.name}: {f.name}", f.shown(), f.goal, f.verdict()) for f in part.figures]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def write_json(name: str, parts: Sequence[Part]) -> Path:
    path = RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"machine": machine(), "parts": [asdict(part) for part in parts]}
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path


def publish(name: str, parts: Sequence[Part]) -> None:
    """Print the table and write ``bench/results/<name>.json``."""
    print_table(parts)
    path = write_json(name, parts)
    print(f"written to {path.relative_to(REPOSITORY)}")


def main_for(run: Callable[[], Part]) -> None:
    """What ``python -m bench.<part>`` does: run that part alone and publish it."""
    part = run()
    publish(part.name, [part])
