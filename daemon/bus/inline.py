"""The inline path: store receptors apply a signal inside the emit's own transaction.

A receptor whose whole effect is a write to the store, that this daemon owns and that has
nothing older left to deliver, applies the signals just appended in the writer's
transaction, in a savepoint of its own, and moves its cursor with them. Whatever it does not
apply there (a backlog, a failure) is left after its cursor, for its worker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime

import structlog

from daemon.bus.receptor import Receptor, StoppedAt, StoreReceptor
from daemon.core.clock import Clock
from daemon.core.signal import Signal
from daemon.store import NewSignal, Stored, Tx

log = structlog.get_logger("cambium.bus")


class CursorMoved(Exception):
    """Another worker (or daemon) settled what this one was about to."""


@dataclass(frozen=True)
class Appended:
    stored: Stored
    waiting: tuple[str, ...]  # receptors whose workers have this signal to deliver


class InlinePath:
    """Appends a batch of emits and applies it for the store receptors that can."""

    def __init__(
        self, receptors: Sequence[Receptor], owned: Callable[[], frozenset[str]], clock: Clock
    ) -> None:
        self._inline = [r for r in receptors if isinstance(r, StoreReceptor)]
        self._routes: dict[str, list[str]] = {}
        for receptor in receptors:
            for signal_type in receptor.binds:
                self._routes.setdefault(signal_type, []).append(receptor.key)
        self._binds = {receptor.key: receptor.binds for receptor in receptors}
        self._owned = owned  # read in the writer thread: the bus replaces the set whole
        self._clock = clock

    def append(self, tx: Tx, new: Sequence[NewSignal]) -> list[Appended]:
        """In the writer's transaction: append, then apply on the fast path."""
        stored = tx.signals.append(new)
        appended = [
            (s.seq, n.signal) for s, n in zip(stored, new, strict=True) if s.seq is not None
        ]
        caught_up: set[str] = set()
        if appended:
            now = self._clock()
            caught_up = self._apply(tx, appended, now)
            self._pass_over(tx, appended, now)
        results = [
            Appended(
                s,
                ()
                if s.duplicate
                else tuple(k for k in self._routes.get(n.signal.type, ()) if k not in caught_up),
            )
            for s, n in zip(stored, new, strict=True)
        ]
        if any(result.waiting for result in results):
            tx.signals.announce_append()
        if appended:
            log.debug("signals stored", count=len(appended), applied=sorted(caught_up))
        return results

    def _pass_over(self, tx: Tx, appended: list[tuple[int, Signal]], now: datetime) -> None:
        """On SQLite, receptors that bind none of these signals' types, and had settled
        everything before them, move past them in the same transaction. The workers read the log in
        ``seq`` order, not by type, so no cursor is left far behind the head for a rare
        type; and the cursors' rows share the page the inline receptor's move writes."""
        if not tx.signals.single_writer:
            # PostgreSQL: other daemons' workers and leases hold these rows too (a lock to
            # wait for, or a deadlock); their workers move past such stretches themselves.
            return
        types = {signal.type for _, signal in appended}
        idle = [key for key, binds in self._binds.items() if binds.isdisjoint(types)]
        if idle:
            tx.signals.pass_over(idle, appended[0][0] - 1, appended[-1][0], now)

    def _apply(self, tx: Tx, appended: list[tuple[int, Signal]], now: datetime) -> set[str]:
        """Apply the just-appended signals for each store receptor that has no backlog, in
        its own savepoint with its cursor. Which receptors are caught up afterwards; for the
        others, whatever was not applied is left to their workers."""
        caught_up: set[str] = set()
        last = appended[-1][0]
        owned = self._owned()
        for receptor in self._inline:
            if receptor.key not in owned:
                continue
            mine = [(seq, signal) for seq, signal in appended if signal.type in receptor.binds]
            if not mine:
                continue
            position = tx.signals.backlog_free_position(receptor.key, receptor.binds, mine[0][0])
            if position is None:
                continue
            signals = [signal for _, signal in mine]
            try:
                _apply_and_advance(tx, receptor, signals, position, last, now)
                caught_up.add(receptor.key)
                continue
            except StoppedAt as stop:
                failed_at = stop.index
            except Exception:  # the worker will try it, and record why it fails
                continue
            if failed_at > 0:  # keep what came before the signal that failed
                with suppress(Exception):
                    before = mine[failed_at][0] - 1
                    _apply_and_advance(tx, receptor, signals[:failed_at], position, before, now)
        return caught_up


def _apply_and_advance(
    tx: Tx,
    receptor: StoreReceptor,
    signals: list[Signal],
    position: int,
    to: int,
    now: datetime,
) -> None:
    with tx.signals.savepoint():
        receptor.apply_batch(tx, signals)
        if not tx.signals.advance(receptor.key, position, to, now):
            raise CursorMoved(receptor.key)
