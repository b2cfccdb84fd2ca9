"""How strong a mark is now.

    current = initial * 2^(-age/h) + sum(delta_i * 2^(-age_i/h)),  clamped to [0, 1]

The initial strength decays from ``first_observed_at`` with half-life ``h`` days, and so
does each reinforcement from its own ``reinforced_at`` (so a mark reinforced once, long ago,
still fades). ``h = 0`` means no decay.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from daemon.core.clock import SECONDS_PER_DAY

# The wither policy: an active mark whose current strength falls below this withers (the
# nightly sweep); a repeated observation revives it.
WITHER_THRESHOLD = 0.1


@dataclass(frozen=True)
class Contribution:
    at: datetime
    delta: float
    now: float  # what this part contributes today, after decay


@dataclass(frozen=True)
class Strength:
    """A mark's current strength, and how it got there."""

    value: float
    initial: float
    half_life_days: float
    age_days: float
    base: float  # the initial strength after decay
    reinforcements: tuple[Contribution, ...]


def decayed(amount: float, since: datetime, now: datetime, half_life_days: float) -> float:
    if half_life_days <= 0:
        return amount
    age_days = max(0.0, (now - since).total_seconds() / SECONDS_PER_DAY)
    return float(amount * 2.0 ** (-age_days / half_life_days))


def current_strength(
    initial: float,
    half_life_days: float,
    first_observed_at: datetime,
    reinforcements: Iterable[tuple[datetime, float]],
    now: datetime,
) -> float:
    """The value of :func:`strength`, without the breakdown (for ranking many marks)."""
    raw = decayed(initial, first_observed_at, now, half_life_days)
    for at, delta in reinforcements:
        raw += decayed(delta, at, now, half_life_days)
    return _clamp(raw)


def withers(value: float) -> bool:
    """Whether a mark of this current strength has faded enough to wither."""
    return value < WITHER_THRESHOLD


def _clamp(raw: float) -> float:
    return min(1.0, max(0.0, raw))


def strength(
    initial: float,
    half_life_days: float,
    first_observed_at: datetime,
    reinforcements: Iterable[tuple[datetime, float]],
    now: datetime,
) -> Strength:
    """The current strength and how it got there."""
    base = decayed(initial, first_observed_at, now, half_life_days)
    parts = tuple(
        Contribution(at, delta, decayed(delta, at, now, half_life_days))
        for at, delta in reinforcements
    )
    return Strength(
        value=_clamp(base + sum(p.now for p in parts)),
        initial=initial,
        half_life_days=half_life_days,
        age_days=max(0.0, (now - first_observed_at).total_seconds() / SECONDS_PER_DAY),
        base=base,
        reinforcements=parts,
    )
