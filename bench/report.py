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
from dataclasses import asdict, dataclass, field, replace
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
    low: float | None = None  # the range of the rounds whose median is ``value``
    high: float | None = None

    def shown(self) -> str:
        shown = f"{_number(self.value, self.unit)}{'x' if self.unit == 'x' else ''}"
        if self.low is not None and self.high is not None:
            shown += f" ({_number(self.low, self.unit)}-{_number(self.high, self.unit)})"
        return shown if self.unit in ("", "x") else f"{shown} {self.unit}"

    def verdict(self) -> str:
        return "" if self.met is None else "met" if self.met else "MISSED"


def _number(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}"
    if not unit:  # a share
        return f"{value:.3f}"
    digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    return f"{value:,.{digits}f}"


def _bound(relation: str, bound: float, unit: str) -> str:
    return f"{relation} {bound:g}" + ("x" if unit == "x" else f" {unit}")


def at_least(name: str, value: float, floor: float, unit: str = "x") -> Figure:
    return Figure(name, value, unit, _bound(">=", floor, unit), value >= floor)


def at_most(name: str, value: float, ceiling: float, unit: str) -> Figure:
    return Figure(name, value, unit, _bound("<=", ceiling, unit), value <= ceiling)


def over_rounds(
    name: str, values: Sequence[float], unit: str, floor: float | None = None
) -> Figure:
    """The median of ``values`` (one per round) with their range; with ``floor``, a goal the
    median must reach."""
    median = statistics.median(values)
    if floor is None:
        return Figure(name, median, unit, low=min(values), high=max(values))
    return replace(at_least(name, median, floor, unit), low=min(values), high=max(values))


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
