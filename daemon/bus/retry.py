"""When a failed delivery is tried again: a strategy that returns a decision.

The workers ask the bus's :class:`RetryPolicy` after each failed attempt; it answers with a
:class:`RetryDecision` (try again at this instant) or ``None`` (give up: the delivery is
dead). The workers only carry the answer out, so another policy is another object, not
another branch in the delivery loop (procrastinate's ``RetryStrategy`` is the model).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from daemon.bus.receptor import Undeliverable


@dataclass(frozen=True)
class RetryDecision:
    """Try the delivery again at ``retry_at``, ``delay`` seconds after the failure."""

    retry_at: datetime
    delay: float


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter; after ``max_attempts`` failures a delivery is dead,
    and an :class:`~daemon.bus.receptor.Undeliverable` error makes it dead at once."""

    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 60.0

    def decide(self, error: BaseException, attempt: int, now: datetime) -> RetryDecision | None:
        """What to do after failed attempt number ``attempt`` (1-based) at ``now``:
        when to try again, or ``None`` to give up."""
        if isinstance(error, Undeliverable) or attempt >= self.max_attempts:
            return None
        delay = self.delay(attempt)
        return RetryDecision(now + timedelta(seconds=delay), delay)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        ceiling: float = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    @property
    def store_pause(self) -> float:
        """Seconds a worker waits after the store itself failed, before reading again."""
        return self.max_delay / 4
