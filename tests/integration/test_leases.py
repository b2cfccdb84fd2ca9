"""Receptor ownership: one owner per receptor, through leases on PostgreSQL (a fleet)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import anyio
import pytest
from emitter_process import Counter, applied, create_applied_table
from sqlalchemy import Connection, create_engine, select, text, update
from support import T0

from daemon.bus import SignalBus
from daemon.bus.leases import Leases
from daemon.core.signal import Signal
from daemon.store import Store
from daemon.store.migrate import upgrade
from daemon.store.tables import ReceptorCursorTable
from daemon.testing import drained

CURSORS = ReceptorCursorTable.__table__  # type: ignore[attr-defined]


def ping(n: int) -> Signal:
    return Signal.parse({"type": "test.ping", "source_id": "tester", "payload": {"n": n}})


@pytest.fixture
def fleet_store(postgres_url: str) -> Store:
    upgrade(postgres_url)
    return Store(postgres_url)


def owners(store: Store) -> dict[str, str | None]:
    """Receptor -> the daemon holding its lease (None: free), as the cursor rows say."""
    query = select(CURSORS.c.receptor, CURSORS.c.owner)
    rows = store.read_sync(lambda tx: tx.connection.execute(query).all())
    return {receptor: owner for receptor, owner in rows}


def take(store: Store, owner: str, now: float, receptor: str = "counter") -> bool:
    """``owner`` takes or renews ``receptor``'s lease ``now`` seconds after T0, for 15 s."""
    at = T0 + timedelta(seconds=now)
    return store.write_sync(
        lambda tx: tx.signals.take_lease(receptor, owner, at, at + timedelta(seconds=15))
    )


def test_a_lease_goes_to_one_owner_until_it_expires(fleet_store: Store) -> None:
    store = fleet_store
    store.write_sync(lambda tx: tx.signals.register("counter", {"test.ping"}, T0))
    assert take(store, "a", 0) is True
    assert take(store, "b", 1) is False, "held by a"
    assert take(store, "a", 10) is True, "renewed by its owner"
    assert take(store, "b", 20) is False, "renewed until 25"
    assert take(store, "b", 26) is True, "expired: taken over"
    assert owners(store) == {"counter": "b"}
    store.write_sync(lambda tx: tx.signals.release_leases("b"))
    assert owners(store) == {"counter": None}


def test_each_receptor_has_a_lease_of_its_own(fleet_store: Store) -> None:
    store = fleet_store
    for receptor in ("counter", "digest"):
        store.write_sync(lambda tx, r=receptor: tx.signals.register(r, {"test.ping"}, T0))
    assert take(store, "a", 0, "counter") is True
    assert take(store, "b", 1, "digest") is True, "a holds counter only"
    assert owners(store) == {"counter": "a", "digest": "b"}


@pytest.fixture
def running_fleet_store(fleet_store: Store) -> Iterator[Store]:
    """The fleet store, started, with a cursor for ``counter`` (none for ``digest``)."""
    fleet_store.start()
    try:
        fleet_store.write_sync(lambda tx: tx.signals.register("counter", {"test.ping"}, T0))
        yield fleet_store
    finally:
        fleet_store.close()


def daemon_leases(store: Store, owner: str, at_seconds: float) -> Leases:
    """A daemon's leases (15 s long) as they stand ``at_seconds`` after T0."""
    at = T0 + timedelta(seconds=at_seconds)
    return Leases(store, owner, ["counter", "digest"], seconds=15, clock=lambda: at)


@pytest.mark.asyncio
async def test_a_released_lease_is_taken_over_at_once_not_when_it_expires(
    running_fleet_store: Store,
) -> None:
    store = running_fleet_store
    first = daemon_leases(store, "first", 0)
    assert await first.renew() == frozenset({"counter"}), "only receptors with a cursor"
    await first.release()
    assert owners(store) == {"counter": None}
    # 14 s before the lease would have run out:
    assert await daemon_leases(store, "second", 1).renew() == frozenset({"counter"})
    assert await first.renew() == frozenset(), "held by second now"


@pytest.mark.asyncio
async def test_a_lease_its_owner_stopped_renewing_is_taken_over_once_it_runs_out(
    running_fleet_store: Store,
) -> None:
    assert await daemon_leases(running_fleet_store, "first", 0).renew() == {"counter"}
    # first is gone without releasing (a crash): its lease holds for 15 s, and only that long.
    assert await daemon_leases(running_fleet_store, "second", 14).renew() == frozenset()
    assert await daemon_leases(running_fleet_store, "second", 16).renew() == {"counter"}


@pytest.mark.asyncio
async def test_a_fleet_applies_each_signal_once_and_hands_over_when_the_owner_stops(
    fleet_store: Store,
) -> None:
    """Two daemons' buses on one PostgreSQL store: emits to either are applied once, by the
    owner of the receptor; when the owner stops, the other takes over."""
    store = fleet_store
    store.start()
    create_applied_table(store)
    try:
        first = SignalBus(store, [Counter()], owner="first", lease_seconds=2)
        second = SignalBus(store, [Counter()], owner="second", lease_seconds=2)
        async with first, second:
            assert first._owned == frozenset({"counter"}), "the first to start owns it"
            assert second._owned == frozenset()
            emitted = [await bus.emit(ping(n)) for n, bus in enumerate([first, second] * 5)]
            with anyio.fail_after(20):
                await drained(second)
            await first.close()  # gives its lease up
            later = [await second.emit(ping(10 + n)) for n in range(5)]
            with anyio.fail_after(20):
                await drained(second)
            assert second._owned == frozenset({"counter"})
        rows = applied(store)
        assert sorted(rows) == sorted(s.id for s in emitted + later), "each applied once"
    finally:
        store.close()


@pytest.mark.asyncio
async def test_a_receptor_the_daemon_may_not_own_waits_for_one_that_may(store: Store) -> None:
    create_applied_table(store)
    async with SignalBus(store, [Counter()], may_own=[]) as bus:
        stored = await bus.emit(ping(0))
        assert await bus.store.read(lambda tx: tx.signals.status(stored.id)) == {
            "counter": "pending"
        }
    assert applied(store) == []
    async with SignalBus(store, [Counter()]) as bus:
        with anyio.fail_after(10):
            assert await bus.settled(stored.id) == {"counter": "delivered"}
    assert applied(store) == [stored.id]


class Named(Counter):
    """A receptor like Counter under another key."""

    def __init__(self, key: str) -> None:
        self.key = key  # type: ignore[misc]


def test_a_renewal_locks_the_cursor_rows_in_the_order_a_start_registers_them(
    fleet_store: Store, postgres_url: str
) -> None:
    """A daemon starting registers its receptors in their order, locking each cursor row,
    while the fleet's members renew their leases. A renewal that took the rows in another
    order (say, by name) held one the start needed while it waited for one the start held:
    a deadlock, which once made a starting daemon exit ("deadlock detected")."""
    store = fleet_store
    receptors = ["zeta", "alpha"]  # registered in this order, which is not the names' order
    for key in receptors:
        store.write_sync(lambda tx, k=key: tx.signals.register(k, {"test.ping"}, T0))
    bus = SignalBus(store, [Named(key) for key in receptors], may_own=sorted(receptors))
    engine = create_engine(postgres_url)
    starting, looking = engine.connect(), engine.connect()
    store.start()
    pool = ThreadPoolExecutor(1)
    try:
        # The start's registration holds the first receptor's row...
        starting.begin()
        starting.execute(update(CURSORS).where(CURSORS.c.receptor == "zeta").values(binds=[]))
        renewed = pool.submit(anyio.run, bus._leases.renew)
        wait_for_a_lock_wait(looking)
        # ...and the renewal, waiting for it, holds no row the start needs next.
        free = select(CURSORS.c.receptor).with_for_update(skip_locked=True)
        with looking.begin():
            assert looking.execute(free).scalars().all() == ["alpha"]
        starting.rollback()
        assert renewed.result(timeout=10) == frozenset(receptors)
    finally:
        starting.close()  # (rolls back: a renewal still waiting goes on)
        pool.shutdown()
        looking.close()
        engine.dispose()
        store.close()


def wait_for_a_lock_wait(connection: Connection) -> None:
    """Until some session waits to update a cursor row."""
    waiting = text(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND query LIKE 'UPDATE receptor_cursors%' AND pid <> pg_backend_pid()"
    )
    deadline = time.monotonic() + 10
    while connection.execute(waiting).scalar() == 0:
        connection.rollback()
        assert time.monotonic() < deadline, "the renewal never waited for the row"
        time.sleep(0.01)
    connection.rollback()
