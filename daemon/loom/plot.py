"""A mark's strength over time, as numbers ready to draw in an SVG (no I/O, no HTML).

The curve runs from the mark's first observation to ``FUTURE`` after now. Each sample
counts only the reinforcements made by then; at a reinforcement the curve jumps, so it gets
a sample just before and one at the instant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from daemon.core.records import Mark, Reinforcement
from daemon.core.strength import WITHER_THRESHOLD, current_strength

FUTURE = timedelta(days=60)
SAMPLES = 160
WIDTH, HEIGHT = 720.0, 240.0
LEFT, RIGHT, TOP, BOTTOM = 44.0, 16.0, 12.0, 28.0  # margins for the axes' labels
JUST_BEFORE = timedelta(microseconds=1)


@dataclass(frozen=True)
class Point:
    at: datetime
    strength: float
    x: float
    y: float


@dataclass(frozen=True)
class Plot:
    start: datetime
    end: datetime
    now: Point
    curve: list[Point]
    reinforcements: list[Point]
    threshold_y: float
    width: float = WIDTH
    height: float = HEIGHT

    @property
    def x0(self) -> float:
        return LEFT

    @property
    def x1(self) -> float:
        return WIDTH - RIGHT

    @property
    def y0(self) -> float:  # strength 0
        return HEIGHT - BOTTOM

    @property
    def y1(self) -> float:  # strength 1
        return TOP

    def y_of(self, strength: float) -> float:
        return _y(strength)

    @property
    def polyline(self) -> str:
        return " ".join(f"{p.x:.2f},{p.y:.2f}" for p in self.curve)


def strength_plot(mark: Mark, reinforcements: Sequence[Reinforcement], now: datetime) -> Plot:
    start = min(mark.first_observed_at, now)
    end = now + FUTURE
    span = (end - start).total_seconds()
    boosts = sorted((r.reinforced_at, r.strength_delta) for r in reinforcements)

    def point(at: datetime) -> Point:
        value = current_strength(
            mark.initial_strength,
            mark.half_life_days,
            mark.first_observed_at,
            [(when, delta) for when, delta in boosts if when <= at],
            at,
        )
        x = LEFT + (WIDTH - LEFT - RIGHT) * (at - start).total_seconds() / span
        return Point(at, value, x, _y(value))

    instants = {start + (end - start) * (i / SAMPLES) for i in range(SAMPLES + 1)}
    instants.add(now)
    for when, _ in boosts:
        if start <= when <= end:
            instants.update((when - JUST_BEFORE, when))
    curve = [point(at) for at in sorted(i for i in instants if start <= i <= end)]
    return Plot(
        start=start,
        end=end,
        now=point(now),
        curve=curve,
        reinforcements=[point(when) for when, _ in boosts if start <= when <= end],
        threshold_y=_y(WITHER_THRESHOLD),
    )


def _y(strength: float) -> float:
    return (HEIGHT - BOTTOM) - (HEIGHT - BOTTOM - TOP) * strength
