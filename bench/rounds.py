"""Measuring under noise: brackets and rounds.

fsync latency on a shared machine drifts more than tenfold within minutes, so a figure alone
says little. Each figure is bracketed: the raw baseline (:mod:`bench.baseline`) is measured
right before and right after it, and the figure is also reported as a ratio to the mean of
those two. The configurations are measured round-robin (A, B, C, A, B, C, ...) so that each
round sees them all under about the same conditions, and the report gives the median of the
rounds and their range. Consecutive figures share a bracket: the baseline measured right
after one is the one right before the next.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.harness import Run
from bench.report import Figure, over_rounds, percentiles


@dataclass(frozen=True)
class Configuration:
    name: str
    measure: Callable[[], Run]


@dataclass(frozen=True)
class Bracketed:
    """One round's measurement of a configuration, between two baseline measurements."""

    run: Run
    before: Run
    after: Run

    @property
    def baseline(self) -> float:
        return (self.before.rate + self.after.rate) / 2

    @property
    def ratio(self) -> float:
        return self.run.rate / self.baseline

    def summary(self) -> dict[str, Any]:
        """This round's numbers, for the JSON report."""
        return {
            "rate": self.run.rate,
            "count": self.run.count,
            "seconds": self.run.seconds,
            "cpu_ms": self.run.cpu_ms,
            "paired_baseline": None if self.run.baseline is None else self.run.baseline.rate,
            "baseline_before": self.before.rate,
            "baseline_after": self.after.rate,
            "ratio": self.ratio,
        }


Rounds = dict[str, list[Bracketed]]


def round_robin(
    configurations: Sequence[Configuration], baseline: Callable[[], Run], rounds: int
) -> Rounds:
    """Every configuration measured once per round, in order, each between two baselines."""
    measured: Rounds = {configuration.name: [] for configuration in configurations}
    before = baseline()
    for _ in range(rounds):
        for configuration in configurations:
            run = configuration.measure()
            after = baseline()
            measured[configuration.name].append(Bracketed(run, before, after))
            before = after
    return measured


def rate_figures(name: str, unit: str, rounds: Sequence[Bracketed]) -> list[Figure]:
    """The rate, absolute and as a ratio to its brackets."""
    return [
        over_rounds(name, [r.run.rate for r in rounds], unit),
        over_rounds(f"{name} / raw 1-row", [r.ratio for r in rounds], "x"),
    ]


def latency_figures(label: str, runs: Sequence[Run]) -> list[Figure]:
    """p50 and p99 of each run's latencies, as medians of the runs with their range."""
    cuts = [percentiles(run.latencies) for run in runs]
    return [
        over_rounds(f"{label} p50", [p50 * 1000 for p50, _ in cuts], "ms"),
        over_rounds(f"{label} p99", [p99 * 1000 for _, p99 in cuts], "ms"),
    ]


def bracket_latencies(rounds: Sequence[Bracketed]) -> list[Run]:
    """Per round, the raw commits of both brackets pooled: the latency beside the figure's."""
    return [
        Run(
            r.before.count + r.after.count,
            r.before.seconds + r.after.seconds,
            r.before.latencies + r.after.latencies,
        )
        for r in rounds
    ]


def ratios(numerators: Sequence[float], denominators: Sequence[float]) -> list[float]:
    """Round by round, one figure over another."""
    return [n / d for n, d in zip(numerators, denominators, strict=True)]


def brackets(rounds: Rounds) -> list[Run]:
    """Every baseline measurement of the run, once each (neighbours share theirs)."""
    runs: dict[int, Run] = {}
    for measured in rounds.values():
        for r in measured:
            runs.setdefault(id(r.before), r.before)
            runs.setdefault(id(r.after), r.after)
    return list(runs.values())
