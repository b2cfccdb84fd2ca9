"""The rhythm scheduler on a real store and bus: slots fire once, catch-up fires the latest
missed slot once, failures are logged, and APScheduler really fires a job."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
import structlog
from sqlalchemy import select

from daemon.bus import BusClosed, SignalBus
from daemon.core.clock import iso
from daemon.core.signal import Signal
from daemon.store import Store, Stored, Tx
from daemon.store.rhythm_state import rhythm_state
from rhythms.scheduler import RhythmScheduler
from rhythms.template import RhythmTemplate, bundled_templates

DOWN_FROM = datetime(2026, 10, 23, 10, tzinfo=UTC)
BACK_AT = datetime(2026, 10, 25, 9, tzinfo=UTC)  # the 03:00 Berlin slot (02:00 UTC) was missed


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class Emits:
    """An emit target that forwards to the bus and remembers what it answered."""

    def __init__(self, bus: SignalBus) -> None:
        self.bus = bus
        self.answers: list[Stored] = []
        self.fired = anyio.Event()

    async def __call__(self, signal: Signal) -> Stored:
        stored = await self.bus.emit(signal)
        self.answers.append(stored)
        self.fired.set()
        return stored


def consolidation(**overrides: Any) -> RhythmTemplate:
    [bundled] = [t for t in bundled_templates("Europe/Berlin") if t.name == "consolidation"]
    return RhythmTemplate.model_validate(bundled.model_dump(by_alias=True) | overrides)


def first_scheduled(store: Store, at: datetime, name: str = "consolidation") -> None:
    store.write_sync(lambda tx: tx.rhythms.first_scheduled([name], at))


async def stored_signals(store: Store) -> list[dict[str, Any]]:
    def query(tx: Tx) -> list[dict[str, Any]]:
        found = (tx.signals.get(row.id).to_json() for row in tx.signals.listing())
        return [signal for signal in found if signal is not None]

    return await store.read(query)


async def run_once(store: Store, template: RhythmTemplate, now: datetime) -> list[Stored]:
    """Start a scheduler at ``now`` (as after a restart), stop it; what it emitted."""
    async with SignalBus(store, []) as bus:
        emits = Emits(bus)
        scheduler = RhythmScheduler([template], emits, store, FakeClock(now))
        await scheduler.start()
        await scheduler.stop()
    return emits.answers


@pytest.mark.asyncio
async def test_catch_up_fires_the_missed_slot_once(store: Store) -> None:
    first_scheduled(store, DOWN_FROM)
    async with SignalBus(store, []) as bus:
        scheduler = RhythmScheduler([consolidation()], bus.emit, store, FakeClock(BACK_AT))
        await scheduler.start()
        assert scheduler.next_fire("consolidation") == datetime(2026, 10, 26, 2, tzinfo=UTC)
        assert scheduler.rhythms == {"consolidation": datetime(2026, 10, 26, 2, tzinfo=UTC)}
        await scheduler.stop()

    (signal,) = await stored_signals(store)
    assert signal["idempotency_key"] == "rhythm:consolidation:2026-10-25T02:00:00Z"
    assert signal["payload"] == {"through": "2026-10-24"}
    assert signal["type"] == "memory.consolidate"
    assert (signal["source_id"], signal["source_layer"]) == ("rhythm:consolidation", "rhythm")
    assert signal["emitted_at"] == "2026-10-25T09:00:00Z"

    # Restarted again (the same day): the same slot is caught up, and the bus stores nothing.
    again = await run_once(store, consolidation(), BACK_AT + timedelta(hours=1))
    assert [answer.duplicate for answer in again] == [True]
    assert again[0].id == signal["id"]
    assert len(await stored_signals(store)) == 1


@pytest.mark.asyncio
async def test_down_over_several_slots_fires_only_the_latest(store: Store) -> None:
    first_scheduled(store, datetime(2026, 10, 1, tzinfo=UTC))
    answers = await run_once(store, consolidation(), BACK_AT)
    assert len(answers) == 1
    (signal,) = await stored_signals(store)
    assert signal["idempotency_key"] == "rhythm:consolidation:2026-10-25T02:00:00Z"
    assert signal["payload"] == {"through": "2026-10-24"}


@pytest.mark.asyncio
async def test_a_rhythm_scheduled_for_the_first_time_has_nothing_to_catch_up(
    store: Store,
) -> None:
    assert await run_once(store, consolidation(), BACK_AT) == []
    assert await stored_signals(store) == []
    recorded = await store.read(lambda tx: tx.connection.execute(select(rhythm_state)).all())
    assert [(row.name, row.first_scheduled_at) for row in recorded] == [("consolidation", BACK_AT)]

    # From then on, slots it was down over are caught up.
    answers = await run_once(store, consolidation(), BACK_AT + timedelta(days=1))
    assert len(answers) == 1
    (signal,) = await stored_signals(store)
    assert signal["idempotency_key"] == "rhythm:consolidation:2026-10-26T02:00:00Z"


@pytest.mark.asyncio
async def test_catchup_skip_never_catches_up(store: Store) -> None:
    first_scheduled(store, DOWN_FROM)
    assert await run_once(store, consolidation(catchup="skip"), BACK_AT) == []
    assert await stored_signals(store) == []


@pytest.mark.asyncio
async def test_a_fire_emits_its_slot_and_schedules_the_next(store: Store) -> None:
    clock = FakeClock(datetime(2026, 3, 28, 12, tzinfo=UTC))
    async with SignalBus(store, []) as bus:
        scheduler = RhythmScheduler([consolidation()], bus.emit, store, clock)
        await scheduler.start()
        slot = scheduler.next_fire("consolidation")
        assert slot == datetime(2026, 3, 29, 1, tzinfo=UTC)  # 03:00 CEST, the first night

        clock.now = slot + timedelta(milliseconds=3)  # APScheduler runs the job a bit late
        await scheduler._fire("consolidation", slot)
        assert scheduler.next_fire("consolidation") == datetime(2026, 3, 30, 1, tzinfo=UTC)
        await scheduler.stop()

    (signal,) = await stored_signals(store)
    assert signal["idempotency_key"] == "rhythm:consolidation:2026-03-29T01:00:00Z"
    assert signal["payload"] == {"through": "2026-03-28"}
    assert signal["emitted_at"] == iso(clock.now)


@pytest.mark.asyncio
async def test_a_job_run_after_later_slots_passed_fires_the_latest(store: Store) -> None:
    # The machine slept from before the 25th's slot until the 27th, 09:00 UTC.
    clock = FakeClock(datetime(2026, 10, 24, 12, tzinfo=UTC))
    async with SignalBus(store, []) as bus:
        scheduler = RhythmScheduler([consolidation()], bus.emit, store, clock)
        await scheduler.start()
        slot = scheduler.next_fire("consolidation")
        assert slot == datetime(2026, 10, 25, 2, tzinfo=UTC)

        clock.now = datetime(2026, 10, 27, 9, tzinfo=UTC)
        await scheduler._fire("consolidation", slot)
        assert scheduler.next_fire("consolidation") == datetime(2026, 10, 28, 2, tzinfo=UTC)
        await scheduler.stop()

    (signal,) = await stored_signals(store)
    assert signal["idempotency_key"] == "rhythm:consolidation:2026-10-27T02:00:00Z"
    assert signal["payload"] == {"through": "2026-10-26"}


@pytest.mark.asyncio
async def test_a_failed_emit_is_logged_and_the_rhythm_goes_on(store: Store) -> None:
    async def refuse(signal: Signal) -> Stored:
        raise BusClosed("the bus is not accepting signals")

    first_scheduled(store, DOWN_FROM)
    clock = FakeClock(BACK_AT)
    scheduler = RhythmScheduler([consolidation()], refuse, store, clock)
    with structlog.testing.capture_logs() as logs:
        await scheduler.start()  # the catch-up fails
        slot = datetime(2026, 10, 26, 2, tzinfo=UTC)
        clock.now = slot
        await scheduler._fire("consolidation", slot)  # and so does the scheduled fire
    await scheduler.stop()

    failures = [entry for entry in logs if entry["event"] == "rhythm fire failed"]
    assert [entry["slot"] for entry in failures] == ["2026-10-25T02:00:00Z", iso(slot)]
    assert all(entry["log_level"] == "error" for entry in failures)
    assert "BusClosed" in failures[0]["error"]
    assert scheduler.next_fire("consolidation") is None  # stopped


@pytest.mark.asyncio
async def test_apscheduler_fires_the_slot(store: Store) -> None:
    # The test clock stands a millisecond before a slot: APScheduler's real timer is due a
    # millisecond from now. Jobs run on this event loop, so none can run before the test
    # awaits: the clock is moved onto the slot first, and the fire is awaited as an event.
    due = datetime(2026, 3, 28, 12, 0, 0, tzinfo=UTC)
    clock = FakeClock(due - timedelta(milliseconds=1))
    live = consolidation(name="live", phase="12:00:00", timezone="UTC")
    async with SignalBus(store, []) as bus:
        emits = Emits(bus)
        scheduler = RhythmScheduler([live], emits, store, clock)
        await scheduler.start()
        assert scheduler.next_fire("live") == due
        assert emits.answers == []
        clock.now = due
        with anyio.fail_after(10):
            await emits.fired.wait()
        assert scheduler.next_fire("live") == due + timedelta(days=1)
        await scheduler.stop()

    (signal,) = await stored_signals(store)
    assert signal["idempotency_key"] == "rhythm:live:2026-03-28T12:00:00Z"
    assert signal["payload"] == {"through": "2026-03-27"}
    assert signal["emitted_at"] == iso(due)


@pytest.mark.asyncio
async def test_stop_gives_a_hanging_fire_its_grace_period_then_cancels_it(store: Store) -> None:
    entered = anyio.Event()

    async def hang(signal: Signal) -> Stored:
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    clock = FakeClock(BACK_AT)
    scheduler = RhythmScheduler([consolidation()], hang, store, clock, grace_period=0.2)
    await scheduler.start()
    slot = scheduler.next_fire("consolidation")
    assert slot is not None
    clock.now = slot
    fire = asyncio.create_task(scheduler._fire("consolidation", slot))
    await entered.wait()
    with anyio.fail_after(3):
        await scheduler.stop()
        await asyncio.wait([fire])
    assert fire.cancelled()
    await scheduler.stop()  # stopping twice is harmless


def test_rhythm_names_are_unique(store: Store) -> None:
    async def emit(signal: Signal) -> Stored:
        raise AssertionError("not called")

    with pytest.raises(ValueError, match="two rhythm templates are named 'consolidation'"):
        RhythmScheduler([consolidation(), consolidation()], emit, store)
    with pytest.raises(KeyError):
        RhythmScheduler([consolidation()], emit, store).next_fire("nightly")
