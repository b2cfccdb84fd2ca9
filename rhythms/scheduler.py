"""The rhythm scheduler: fires each rhythm's slots as signals, through APScheduler.

Every fire is emitted with the idempotency key ``rhythm:<name>:<slot>``, so a slot is stored
at most once whatever crashes, restarts or double fires happen: the bus answers a repeat
with ``duplicate``.

The slot travels with the job. Each rhythm has one pending APScheduler job at a time, a
``DateTrigger`` at its next slot carrying that slot as its argument; when it runs it
schedules the following slot and emits its own. The job never works its slot out from the
clock, which at fire time is always a little late (and after a suspend, very late: then, if
later slots have passed too, it fires the latest of them instead, as catch-up would).

APScheduler's defaults would lose slots: a job more than one second late is dropped as a
misfire, and a job re-added at start forgets a run missed while the daemon was down. So jobs
never expire (``misfire_grace_time=None``), and missed slots are our own catch-up's business:
at start, a ``fire_once`` rhythm fires its latest slot that passed since the rhythm was first
scheduled (``rhythm_state``), once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import structlog
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger

from daemon.core.clock import Clock, iso, utcnow
from daemon.core.signal import Signal
from daemon.store import Store, Stored
from rhythms.template import RhythmTemplate, latest_slot, next_slot

Emit = Callable[[Signal], Awaitable[Stored]]

log = structlog.get_logger("cambium.rhythms")


class RhythmScheduler:
    """Fires ``templates`` through ``emit`` (the bus's); ``store`` keeps when each rhythm was
    first scheduled; ``clock`` is the time every slot is measured on."""

    def __init__(
        self,
        templates: Iterable[RhythmTemplate],
        emit: Emit,
        store: Store,
        clock: Clock = utcnow,
        *,
        grace_period: float = 5.0,
    ) -> None:
        self.templates: dict[str, RhythmTemplate] = {}
        for template in templates:
            if template.name in self.templates:
                raise ValueError(f"two rhythm templates are named {template.name!r}")
            self.templates[template.name] = template
        self.emit = emit
        self.store = store
        self.clock = clock
        self.grace_period = grace_period
        self._scheduler: Any = None
        self._next: dict[str, datetime] = {}
        self._in_flight: set[asyncio.Task[Any]] = set()

    def next_fire(self, name: str) -> datetime | None:
        """The rhythm's next slot (UTC), or None while the scheduler is not running."""
        if name not in self.templates:
            raise KeyError(name)
        return self._next.get(name)

    @property
    def rhythms(self) -> dict[str, datetime | None]:
        """Each rhythm's next slot, for the health endpoint."""
        return {name: self._next.get(name) for name in self.templates}

    async def start(self) -> None:
        """Schedule every rhythm's next slot, then fire the missed slots that catch-up owes."""
        if self._scheduler is not None:
            raise RuntimeError("the rhythm scheduler is already running")
        now = self.clock()
        names = list(self.templates)
        first_scheduled = await self.store.write(lambda tx: tx.rhythms.first_scheduled(names, now))
        self._scheduler = AsyncIOScheduler(
            timezone=UTC,
            job_defaults={"misfire_grace_time": None, "coalesce": True, "max_instances": 1},
        )
        self._scheduler.start()
        for template in self.templates.values():
            self._schedule(template, next_slot(template, now))
        for name, template in self.templates.items():
            if template.catchup != "fire_once":
                continue
            missed = latest_slot(template, first_scheduled[name], now)
            if missed is not None:
                log.info("catching up a missed slot", rhythm=name, slot=iso(missed))
                await self._emit_slot(template, missed)
        log.info("rhythms started", next_fire={name: iso(at) for name, at in self._next.items()})

    async def stop(self) -> None:
        """Stop firing; fires in flight get ``grace_period`` seconds, then are cancelled."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is None:
            return
        scheduler.pause()
        if self._in_flight:
            _, unfinished = await asyncio.wait(self._in_flight, timeout=self.grace_period)
            for task in unfinished:
                task.cancel()
        scheduler.shutdown(wait=False)
        self._next.clear()
        # AsyncIOScheduler shuts down on the event loop's next turn: let it.
        await asyncio.sleep(0)
        log.info("rhythms stopped")

    def _schedule(self, template: RhythmTemplate, slot: datetime) -> None:
        if self._scheduler is None:  # a fire finishing after stop() schedules nothing
            return
        self._next[template.name] = slot
        # APScheduler only knows the wall clock: make the job due once the slot's delay on
        # our clock has passed. In production our clock is the wall clock, so that is the
        # slot itself (read in this order, never a moment before it); under a test clock
        # it keeps APScheduler from firing slots that are due only in the test's time.
        delay = slot - self.clock()
        self._scheduler.add_job(
            self._fire,
            DateTrigger(run_date=utcnow() + delay, timezone=UTC),
            args=[template.name, slot],
            id=f"rhythm:{template.name}:{iso(slot)}",
            name=f"rhythm {template.name}",
        )

    async def _fire(self, name: str, scheduled: datetime) -> None:
        """The job APScheduler runs at ``scheduled``: schedule the next slot, emit this one."""
        task = asyncio.current_task()
        assert task is not None
        self._in_flight.add(task)
        try:
            template = self.templates[name]
            now = self.clock()
            # A job runs late when the machine slept through its slot. If later slots have
            # passed too, fire only the latest of them, as catch-up at start would.
            slot = latest_slot(template, scheduled, now) or scheduled
            self._schedule(template, next_slot(template, max(slot, now)))
            await self._emit_slot(template, slot)
        finally:
            self._in_flight.discard(task)

    async def _emit_slot(self, template: RhythmTemplate, slot: datetime) -> None:
        """Emit ``slot``'s signal. A failure is logged, not raised: the rhythm goes on, and
        the slot is caught up at the next start if it is still the latest one missed."""
        try:
            stored = await self.emit(template.signal_for(slot, self.clock()))
        except Exception as exc:
            log.error("rhythm fire failed", rhythm=template.name, slot=iso(slot), error=repr(exc))
            return
        log.info(
            "rhythm fired",
            rhythm=template.name,
            slot=iso(slot),
            signal_id=stored.id,
            duplicate=stored.duplicate,
        )
