"""Strength: exponential decay of the initial strength and of each reinforcement."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from daemon.core.strength import WITHER_THRESHOLD, strength, withers

T0 = datetime(2026, 4, 11, tzinfo=UTC)
DAY = timedelta(days=1)


def at(
    days: float,
    reinforcements: tuple[tuple[datetime, float], ...] = (),
    initial: float = 1.0,
    h: float = 7,
) -> float:
    return strength(initial, h, T0, reinforcements, T0 + days * DAY).value


def test_half_life_examples() -> None:
    assert at(0) == pytest.approx(1.0)
    assert at(7) == pytest.approx(0.5)
    assert at(14) == pytest.approx(0.25)


def test_reinforcement_adds_and_decays_too() -> None:
    boost = ((T0 + 7 * DAY, 0.2),)
    assert at(7, boost) == pytest.approx(0.7)
    assert at(14, boost) == pytest.approx(0.35)


def test_an_old_reinforcement_fades() -> None:
    assert at(70, ((T0 + DAY, 0.2),)) < WITHER_THRESHOLD


def test_clamped_to_unit_interval() -> None:
    assert at(0, ((T0, 0.5),), initial=0.9) == 1.0
    assert at(0, ((T0, -2.0),)) == 0.0


def test_zero_half_life_never_decays() -> None:
    assert at(3650, h=0, initial=0.4) == pytest.approx(0.4)


def test_breakdown_explains_the_value() -> None:
    s = strength(0.8, 7, T0, [(T0 + 7 * DAY, 0.2)], T0 + 14 * DAY)
    assert (s.initial, s.half_life_days) == (0.8, 7)
    assert s.age_days == pytest.approx(14)
    assert s.base == pytest.approx(0.2)
    [part] = s.reinforcements
    assert (part.at, part.delta) == (T0 + 7 * DAY, 0.2)
    assert part.now == pytest.approx(0.1)
    assert s.value == pytest.approx(0.3)


def test_age_counts_from_first_observation_and_never_runs_backwards() -> None:
    assert strength(0.8, 7, T0, [], T0 + DAY / 2).age_days == pytest.approx(0.5)
    assert strength(0.8, 7, T0, [], T0 - DAY).age_days == 0.0


def test_withers_below_threshold() -> None:
    assert WITHER_THRESHOLD == 0.1
    assert withers(0.0999999) and not withers(WITHER_THRESHOLD), "strictly below withers"
    assert at(21, initial=0.3) < WITHER_THRESHOLD
