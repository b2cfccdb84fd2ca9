"""The strength plot's time axis: "now" never overprints the dates at its ends, however
old or new the mark (a mark seen moments ago puts now on the start; one seen years ago
puts it near the end)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from daemon.core.records import Mark
from daemon.loom.plot import AXIS_Y, LEFT, RIGHT, TOP_Y, WIDTH, Label, axis_labels, strength_plot

NOW = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)
DATE = "2026-05-20 14:00 CEST"


def mark_seen(ago: timedelta) -> Mark:
    at = NOW - ago
    return Mark(
        id="mk_1",
        workspace_id="default",
        subject="user.x",
        observation="x",
        evidence={"note": "n"},
        initial_strength=0.6,
        half_life_days=14.0,
        observed_by="agent",
        first_observed_at=at,
        last_reinforced_at=at,
        created_at=at,
        updated_at=at,
    )


def apart(labels: list[Label]) -> bool:
    return not any(a.touches(b) for i, a in enumerate(labels) for b in labels[i + 1 :])


@pytest.mark.parametrize(
    ("ago", "where"),
    [
        (timedelta(0), "top"),  # now is the start
        (timedelta(days=1), "top"),  # a day of 61: still on the start date
        (timedelta(days=60), "axis"),  # half way: room on the axis
        (timedelta(days=3650), "top"),  # ten years: now is a hair from the end
    ],
)
def test_now_is_labelled_apart_from_the_dates(ago: timedelta, where: str) -> None:
    plot = strength_plot(mark_seen(ago), [], NOW, lambda _: DATE)
    start, now, end = plot.labels
    assert (start.text, now.text, end.text) == (DATE, "now", DATE)
    assert apart(plot.labels)
    assert now.y == (TOP_Y if where == "top" else AXIS_Y)
    left, right = now.extent
    assert left >= LEFT and right <= WIDTH - RIGHT  # inside the plot
    near = {"start": left, "middle": (left + right) / 2, "end": right}[now.anchor]
    assert abs(near - plot.now.x) < 10  # beside its line, or on it


def test_on_the_axis_now_is_centred_on_its_line() -> None:
    [_, now, _] = axis_labels(DATE, DATE, 360.0)
    assert (now.x, now.y, now.anchor) == (360.0, AXIS_Y, "middle")


def test_labels_touch_only_on_the_same_row_and_within_the_gap() -> None:
    first = Label("abc", 0.0, AXIS_Y, "start")
    assert first.touches(Label("abc", 22.0, AXIS_Y, "start"))  # 3 characters: about 20 wide
    assert not first.touches(Label("abc", 30.0, AXIS_Y, "start"))
    assert not first.touches(Label("abc", 5.0, TOP_Y, "start"))
