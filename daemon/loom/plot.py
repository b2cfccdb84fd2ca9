"""A mark's strength over time, as numbers ready to draw in an SVG (no I/O, no HTML).

The curve runs from the mark's first observation to ``FUTURE`` after now. Each sample
counts only the reinforcements made by then; at a reinforcement the curve jumps, so it gets
a sample just before and one at the instant.

The time axis is labelled at its start, at now and at its end. "now" sits on the axis
between the other two when it fits there; when it would touch either (a mark first seen
moments ago, or years ago) it moves to the top of the plot, beside the line that marks now.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from daemon.core.records import Mark, Reinforcement
from daemon.core.strength import WITHER_THRESHOLD, current_strength

FUTURE = timedelta(days=60)
SAMPLES = 160
WIDTH, HEIGHT = 720.0, 240.0
LEFT, RIGHT, TOP, BOTTOM = 44.0, 16.0, 12.0, 28.0  # margins for the axes' labels
JUST_BEFORE = timedelta(microseconds=1)
# An 11 px label's characters are at most this wide (the digits of system sans fonts are
# about 6.1): a label's extent is estimated from its length, generously.
CHAR_WIDTH = 6.8
LABEL_GAP = 4.0  # between two labels, and between "now" and its line
AXIS_Y = HEIGHT - 8  # the baseline of the time axis's labels
TOP_Y = TOP + 11  # the baseline of "now" when it moves to the top

Anchor = Literal["start", "middle", "end"]


@dataclass(frozen=True)
class Label:
    text: str
    x: float
    y: float
    anchor: Anchor

    @property
    def extent(self) -> tuple[float, float]:
        """The horizontal span the label is drawn over (estimated)."""
        width = len(self.text) * CHAR_WIDTH
        left = {"start": self.x, "middle": self.x - width / 2, "end": self.x - width}
        return left[self.anchor], left[self.anchor] + width

    def touches(self, other: Label) -> bool:
        if self.y != other.y:
            return False
        (a, b), (c, d) = self.extent, other.extent
        return a < d + LABEL_GAP and c < b + LABEL_GAP


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
    labels: list[Label]
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


def strength_plot(
    mark: Mark,
    reinforcements: Sequence[Reinforcement],
    now: datetime,
    label: Callable[[datetime], str],
) -> Plot:
    """The plot of ``mark``'s strength; ``label`` writes an instant as the axis shows it."""
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
    at_now = point(now)
    return Plot(
        start=start,
        end=end,
        now=at_now,
        curve=curve,
        reinforcements=[point(when) for when, _ in boosts if start <= when <= end],
        threshold_y=_y(WITHER_THRESHOLD),
        labels=axis_labels(label(start), label(end), at_now.x),
    )


def axis_labels(start: str, end: str, now_x: float) -> list[Label]:
    """The time axis's labels: ``start`` and ``end`` at its ends, "now" at ``now_x`` on
    the axis if it touches neither, else at the top beside its line (on the side with room)."""
    first = Label(start, LEFT, AXIS_Y, "start")
    last = Label(end, WIDTH - RIGHT, AXIS_Y, "end")
    now = Label("now", now_x, AXIS_Y, "middle")
    if now.touches(first) or now.touches(last):
        room_right = now_x + LABEL_GAP + len(now.text) * CHAR_WIDTH <= WIDTH - RIGHT
        now = (
            Label(now.text, now_x + LABEL_GAP, TOP_Y, "start")
            if room_right
            else Label(now.text, now_x - LABEL_GAP, TOP_Y, "end")
        )
    return [first, now, last]


def _y(strength: float) -> float:
    return (HEIGHT - BOTTOM) - (HEIGHT - BOTTOM - TOP) * strength
