"""The signal bus on a real store (SQLite file, and PostgreSQL when configured)."""

from __future__ import annotations

import asyncio
import os
import signal as signal_module
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.to_thread
import pytest
import structlog
from emitter_process import Counter, applied, create_applied_table
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError
from support import T0

from daemon.bus import (
    DeliveryContext,
    PayloadError,
    Receptor,
    RetryPolicy,
    SignalBus,
    Undeliverable,
)
from daemon.core.clock import iso
from daemon.core.signal import Signal, SignalRejected
from daemon.store import NewSignal, Store, Stored, Tx
from daemon.store.migrate import upgrade
from daemon.store.tables import SignalTable
from daemon.testing import drained

FAST = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05)


def signal(n: int = 0, **overrides: Any) -> Signal:
    return Signal.parse(
        {"type": "test.ping", "source_id": "tester", "payload": {"n": n}, **overrides}
    )


class Recorder(Receptor):
    """Records what it sees, and checks that each signal is already in the store."""

    key: ClassVar[str] = "recorder"
    binds: ClassVar[frozenset[str]] = frozenset({"test.ping"})

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seen: list[int] = []
        self.found_in_store: list[bool] = []
        self.done = anyio.Event()
        self.expected = 1

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        stored = await self.store.read(lambda tx: tx.signals.get(signal.id))
        self.found_in_store.append(stored is not None)
        self.seen.append(signal.payload["n"])
        if len(self.seen) >= self.expected:
            self.done.set()


class Flaky(Receptor):
    key: ClassVar[str] = "flaky"
    binds: ClassVar[frozenset[str]] = frozenset({"test.ping"})

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts: list[int] = []

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        self.attempts.append(delivery.attempt)
        if len(self.attempts) <= self.failures:
            raise RuntimeError(f"transient failure {len(self.attempts)}")


async def wait_for(bus: SignalBus, signal_id: str) -> dict[str, str]:
    with anyio.fail_after(10):
        return await bus.settled(signal_id)


class SaysNul(Receptor):
    """Fails the first signal with an error text holding a NUL (as a payload quoted in an
    error message would), then delivers the rest."""

    key: ClassVar[str] = "says_nul"
    binds: ClassVar[frozenset[str]] = frozenset({"test.ping"})

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        if signal.payload["n"] == 0:
            raise RuntimeError("cannot use 'a\x00b'")


@pytest.mark.asyncio
async def test_an_error_text_with_nul_is_stored_and_never_stalls_the_receptor(
    store: Store,
) -> None:
    # PostgreSQL refuses NUL in text: storing the raw error would fail, leaving the delivery
    # pending for good and every later signal of the receptor behind it.
    async with SignalBus(store, [SaysNul()], retry=FAST) as bus:
        first = await bus.emit(signal(0))
        second = await bus.emit(signal(1))
        assert await wait_for(bus, first.id) == {"says_nul": "dead"}
        assert await wait_for(bus, second.id) == {"says_nul": "delivered"}
    stored = store.read_sync(lambda tx: tx.signals.get(first.id))
    assert stored is not None
    assert stored.deliveries[0].last_error == "cannot use 'a\\x00b'"


@pytest.mark.asyncio
async def test_receptor_finds_its_signal_already_stored(store: Store) -> None:
    recorder = Recorder(store)
    recorder.expected = 20
    async with SignalBus(store, [recorder]) as bus:
        for n in range(20):
            await bus.emit(signal(n))
        with anyio.fail_after(10):
            await recorder.done.wait()
    assert recorder.found_in_store == [True] * 20
    assert recorder.seen == list(range(20)), "persisted order"


@pytest.mark.asyncio
async def test_each_batch_of_emits_is_logged_once_with_what_applied_it(store: Store) -> None:
    create_applied_table(store)
    with structlog.testing.capture_logs() as logs:
        async with SignalBus(store, [Counter(), Recorder(store)]) as bus:
            await bus.emit(signal())
            await bus.emit(signal(1, type="test.unbound"))
    stored = [line for line in logs if line["event"] == "signals stored"]
    assert [(line["log_level"], line["count"], line["applied"]) for line in stored] == [
        ("debug", 1, ["counter"]),  # in the emit's own commit; the recorder's worker follows
        ("debug", 1, []),
    ]


@pytest.mark.asyncio
async def test_fails_twice_then_delivered_on_attempt_three(store: Store) -> None:
    flaky = Flaky(failures=2)
    async with SignalBus(store, [flaky], retry=FAST) as bus:
        stored = await bus.emit(signal())
        assert await wait_for(bus, stored.id) == {"flaky": "delivered"}
    assert flaky.attempts == [1, 2, 3]
    record = store.read_sync(lambda tx: tx.signals.get(stored.id).to_json())
    assert record is not None
    assert record["deliveries"][0]["attempts"] == 3


@pytest.mark.asyncio
async def test_always_failing_goes_dead_then_manual_retry_delivers(store: Store) -> None:
    flaky = Flaky(failures=10**6)
    async with SignalBus(store, [flaky], retry=FAST) as bus:
        stored = await bus.emit(signal())
        assert await wait_for(bus, stored.id) == {"flaky": "dead"}
        assert flaky.attempts == [1, 2, 3]
        record = store.read_sync(lambda tx: tx.signals.get(stored.id).to_json())
        assert record is not None
        assert record["deliveries"][0]["last_error"] == "transient failure 3"
        dead = store.read_sync(lambda tx: [s.to_json() for s in tx.signals.listing(status="dead")])
        assert [s["id"] for s in dead] == [stored.id]

        assert await bus.retry(stored.id) == ["flaky"]  # the fault is not fixed yet
        assert await wait_for(bus, stored.id) == {"flaky": "dead"}
        assert flaky.attempts == [1, 2, 3, 1, 2, 3], "each retried attempt counted, then it stops"
        record = store.read_sync(lambda tx: tx.signals.get(stored.id).to_json())
        assert record is not None
        assert record["deliveries"][0]["last_error"] == "transient failure 6"

        flaky.failures = 0  # the fault is fixed
        assert await bus.retry(stored.id) == ["flaky"]
        assert await wait_for(bus, stored.id) == {"flaky": "delivered"}
    assert flaky.attempts[-1] == 1, "a manual retry starts counting again"


@pytest.mark.asyncio
async def test_payload_error_is_dead_at_once(store: Store) -> None:
    class Strict(Receptor):
        key: ClassVar[str] = "strict"
        binds: ClassVar[frozenset[str]] = frozenset({"test.ping"})
        calls = 0

        async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
            Strict.calls += 1
            raise PayloadError("subject", "must be a non-empty string")

    async with SignalBus(store, [Strict()], retry=FAST) as bus:
        stored = await bus.emit(signal())
        assert await wait_for(bus, stored.id) == {"strict": "dead"}
    record = store.read_sync(lambda tx: tx.signals.get(stored.id).to_json())
    assert record is not None
    assert record["deliveries"][0]["last_error"] == "payload.subject: must be a non-empty string"
    assert Strict.calls == 1


@pytest.mark.asyncio
async def test_slow_receptor_does_not_delay_another(store: Store) -> None:
    class Sleeper(Receptor):
        key: ClassVar[str] = "sleeper"
        binds: ClassVar[frozenset[str]] = frozenset({"test.ping"})
        release = anyio.Event()

        async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
            await self.release.wait()

    recorder = Recorder(store)
    recorder.expected = 5
    sleeper = Sleeper()
    async with SignalBus(store, [sleeper, recorder], grace_period=0.5) as bus:
        for n in range(5):
            await bus.emit(signal(n))
        with anyio.fail_after(5):
            await recorder.done.wait()
        assert recorder.seen == list(range(5))
        sleeper.release.set()


@pytest.mark.asyncio
async def test_repeated_idempotency_key_stores_one_signal(store: Store) -> None:
    async with SignalBus(store, []) as bus:
        first = await bus.emit(signal(1, idempotency_key="rhythm:x:1"))
        again = await bus.emit(signal(2, idempotency_key="rhythm:x:1"))
        assert not first.duplicate
        assert again.duplicate and again.id == first.id
        async with anyio.create_task_group() as tg:  # concurrent duplicates, one batch
            for n in range(5):
                tg.start_soon(bus.emit, signal(n, idempotency_key="rhythm:x:2"))
    count = store.read_sync(
        lambda tx: tx.connection.execute(select(func.count()).select_from(SignalTable)).scalar()
    )
    assert count == 2


@pytest.mark.asyncio
async def test_unbound_signal_is_stored_as_unrouted(store: Store) -> None:
    async with SignalBus(store, [Recorder(store)]) as bus:
        stored = await bus.emit(signal(type="nobody.listens"))
    unrouted = store.read_sync(
        lambda tx: [s.to_json() for s in tx.signals.listing(status="unrouted")]
    )
    assert [s["id"] for s in unrouted] == [stored.id]


@pytest.mark.asyncio
async def test_emit_raw_refuses_bad_input_and_stores_nothing(store: Store) -> None:
    async with SignalBus(store, [Recorder(store)]) as bus:
        with pytest.raises(SignalRejected) as exc:
            await bus.emit_raw({"type": "test.ping"})
        assert [e.field for e in exc.value.errors] == ["source_id"]
    assert store.read_sync(lambda tx: tx.signals.listing()) == []


@pytest.mark.asyncio
async def test_workspace_defaults_to_the_bus_workspace(store: Store) -> None:
    async with SignalBus(store, [], workspace="obadiah") as bus:
        stored = await bus.emit(signal())
    record = store.read_sync(lambda tx: tx.signals.get(stored.id).to_json())
    assert record is not None and record["workspace_id"] == "obadiah"


class PoisonAware(Counter):
    def apply(self, tx: Tx, signal: Signal) -> None:
        if signal.payload.get("poison"):
            raise PayloadError("poison", "refused")
        super().apply(tx, signal)


@pytest.mark.asyncio
async def test_store_receptor_applies_once_and_a_poisoned_signal_writes_nothing(
    store: Store,
) -> None:
    create_applied_table(store)
    async with SignalBus(store, [PoisonAware()], retry=FAST) as bus:
        ids = []
        async with anyio.create_task_group() as tg:

            async def emit(n: int) -> None:
                ids.append((await bus.emit(signal(n, payload={"poison": n == 7}))).id)

            for n in range(50):
                tg.start_soon(emit, n)
        for signal_id in ids:
            await wait_for(bus, signal_id)
        bad = [
            i
            for i in ids
            if store.read_sync(lambda tx, i=i: tx.signals.get(i).to_json())["payload"]["poison"]
        ]  # type: ignore[index]
    rows = applied(store)
    assert sorted(rows) == sorted(set(ids) - set(bad))
    assert (
        store.read_sync(lambda tx: [s.to_json() for s in tx.signals.listing(status="dead")])[0][
            "id"
        ]
        == bad[0]
    )


@pytest.mark.asyncio
async def test_checkpoint_survives_into_the_next_attempt(store: Store) -> None:
    class Stepper(Receptor):
        key: ClassVar[str] = "stepper"
        binds: ClassVar[frozenset[str]] = frozenset({"test.ping"})
        seen: ClassVar[list[Any]] = []

        async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
            self.seen.append(delivery.checkpoint)
            if delivery.checkpoint is None:
                await delivery.save_checkpoint({"step": 1})
                raise RuntimeError("crash after step 1")

    async with SignalBus(store, [Stepper()], retry=FAST) as bus:
        stored = await bus.emit(signal())
        assert await wait_for(bus, stored.id) == {"stepper": "delivered"}
    assert Stepper.seen == [None, {"step": 1}]


@pytest.mark.asyncio
async def test_pending_deliveries_are_replayed_by_a_new_bus(store: Store) -> None:
    async with SignalBus(store, []) as bus:  # no receptor running: nothing delivered
        pass

    # Emit through a bus whose receptor blocks, then stop it before anything is delivered.
    class Blocked(Receptor):
        key: ClassVar[str] = "recorder"
        binds: ClassVar[frozenset[str]] = frozenset({"test.ping"})

        delivering = anyio.Event()

        async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
            self.delivering.set()
            await anyio.sleep_forever()

    blocked = Blocked()
    with structlog.testing.capture_logs() as logs:
        async with SignalBus(store, [blocked], grace_period=0.1, owner="host:1") as bus:
            ids = [(await bus.emit(signal(n))).id for n in range(3)]
            with anyio.fail_after(10):
                await blocked.delivering.wait()  # stopped while a delivery is in flight
    bus_lines = ("bus started", "grace period over; interrupting deliveries", "bus stopped")
    said = [(line["event"], line["log_level"]) for line in logs if line["event"] in bus_lines]
    assert said == [
        ("bus started", "info"),
        ("grace period over; interrupting deliveries", "warning"),
        ("bus stopped", "info"),
    ]
    started = next(line for line in logs if line["event"] == "bus started")
    assert {k: started[k] for k in ("receptors", "owned", "owner")} == {
        "receptors": ["recorder"],
        "owned": ["recorder"],
        "owner": "host:1",
    }
    [over] = [line for line in logs if line["log_level"] == "warning"]
    assert over["seconds"] == 0.1  # how long the deliveries had
    recorder = Recorder(store)
    recorder.expected = 3
    async with SignalBus(store, [recorder]):
        with anyio.fail_after(10):
            await recorder.done.wait()
    assert recorder.seen == [0, 1, 2]
    assert len(ids) == 3


@pytest.mark.asyncio
async def test_emit_after_close_is_refused(store: Store) -> None:
    from daemon.bus import BusClosed

    async with SignalBus(store, []) as bus:
        pass
    with pytest.raises(BusClosed):
        await bus.emit(signal())


@pytest.mark.asyncio
@pytest.mark.subprocess
async def test_sigkill_mid_stream_loses_nothing_acknowledged_and_applies_once(
    store: Store, db_url: str
) -> None:
    create_applied_table(store)
    child = await anyio.open_process(
        [
            sys.executable,
            str(Path(__file__).parent.parent / "emitter_process.py"),
            db_url,
            "2000",
            "4",
        ],
        stderr=subprocess.DEVNULL,
    )
    acknowledged: list[str] = []
    buffer = b""
    assert child.stdout is not None
    async for chunk in child.stdout:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        acknowledged.extend(line.decode()[4:] for line in lines if line.startswith(b"ack "))
        if len(acknowledged) >= 600:
            child.send_signal(signal_module.SIGKILL)
            break
    await child.wait()
    assert child.returncode == -signal_module.SIGKILL

    async with SignalBus(store, [Counter()]) as bus:  # a new bus on the same database
        with anyio.fail_after(30):
            await drained(bus)
        assert bus.accepting

    stored = set(
        store.read_sync(lambda tx: tx.connection.execute(select(SignalTable.id)).scalars())
    )
    rows = applied(store)
    assert set(acknowledged) <= stored, "every acknowledged signal is stored"
    assert set(acknowledged) <= set(rows), "every acknowledged signal is applied"
    assert len(rows) == len(set(rows)), "nothing is applied twice"
    assert set(rows) == stored, "everything stored is applied, once"


class OvertakenCounter(Receptor):
    """Another daemon on the same database delivers the signal (applies it and moves the
    cursor past it) while this bus is working on it; then this bus tries to commit its own
    application."""

    key: ClassVar[str] = "counter"
    binds: ClassVar[frozenset[str]] = Counter.binds

    def __init__(self, store: Store) -> None:
        self.store = store
        self.refused: list[str] = []
        self.finished = anyio.Event()

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        def elsewhere(tx: Tx) -> None:
            cursor = tx.signals.cursor(self.key)
            assert cursor is not None
            assert tx.signals.advance(self.key, cursor.position, delivery.seq, T0)
            Counter().apply(tx, signal)

        try:
            await self.store.write(elsewhere)
            await delivery.commit(lambda tx: Counter().apply(tx, signal))
        except RuntimeError as exc:
            self.refused.append(str(exc))
            raise
        finally:
            self.finished.set()


@pytest.mark.asyncio
async def test_a_delivery_done_elsewhere_is_never_applied_twice(store: Store) -> None:
    create_applied_table(store)
    receptor = OvertakenCounter(store)
    with structlog.testing.capture_logs() as logs:
        async with SignalBus(store, [receptor], retry=FAST) as bus:
            stored = await bus.emit(signal())
            with anyio.fail_after(10):
                await receptor.finished.wait()
                assert await bus.settled(stored.id) == {"counter": "delivered"}
    assert applied(store) == [stored.id], "applied once, by whoever settled it first"
    said = [(line["event"], line.get("signal_id"), line.get("receptor")) for line in logs]
    assert ("settled elsewhere", stored.id, "counter") in said, "not a failure: logged as such"
    assert not [line for line in logs if line["event"] == "delivery failed"]
    assert receptor.refused == [f"delivery of {stored.id} to counter is no longer pending"]
    [delivery] = store.read_sync(lambda tx: tx.signals.get(stored.id)).deliveries  # type: ignore[union-attr]
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("delivered", 1, None)


def append_signals(tx: Tx, new: Sequence[NewSignal]) -> list[Stored]:
    return tx.signals.append(new)


@pytest.mark.asyncio
async def test_a_cursor_moves_only_from_where_the_mover_saw_it(store: Store) -> None:
    # The bus's guards against applying twice rest on these answers.
    store.write_sync(lambda tx: tx.signals.register("r", {"test.ping"}, T0))
    emitted = [signal(n) for n in range(2)]
    for one in emitted:
        await store.write_batched(append_signals, NewSignal(one, T0))
    position, pending = store.read_sync(lambda tx: tx.signals.next_deliveries("r", 10))
    assert [d.signal.id for d in pending] == [one.id for one in emitted]
    first = pending[0]
    assert store.write_sync(lambda tx: tx.signals.settle("r", [first], position, T0)) is True
    assert store.write_sync(lambda tx: tx.signals.settle("r", [first], position, T0)) is False
    assert store.write_sync(lambda tx: tx.signals.settle("r", pending, position, T0)) is False
    assert store.write_sync(lambda tx: tx.signals.settle("r", pending[1:], first.seq, T0)) is True
    assert store.read_sync(lambda tx: tx.signals.next_deliveries("r", 10)) == (pending[1].seq, [])


async def backlog_of(store: Store, receptor: str, signals: Sequence[Signal]) -> list[Stored]:
    """``signals`` stored while no bus ran: work waiting behind ``receptor``'s cursor."""
    store.write_sync(lambda tx: tx.signals.register(receptor, {"test.ping"}, T0))
    return [await store.write_batched(append_signals, NewSignal(one, T0)) for one in signals]


def delivered_lines(logs: list[dict[str, Any]]) -> list[tuple[int, str, int]]:
    return [
        (line["count"], line["first_signal_id"], line["last_seq"])
        for line in logs
        if line["event"] == "delivered"
    ]


async def drain_backlog(
    store: Store, receptor: Receptor, signals: Sequence[Signal]
) -> tuple[list[Stored], list[dict[str, Any]]]:
    """``signals`` left behind ``receptor``'s cursor, then a bus started to deliver them: what
    was stored, and what the bus logged until it had drained."""
    create_applied_table(store)
    stored = await backlog_of(store, receptor.key, signals)
    with structlog.testing.capture_logs() as logs:
        async with SignalBus(store, [receptor], retry=FAST) as bus:
            with anyio.fail_after(10):
                await drained(bus)
    return stored, logs


@pytest.mark.asyncio
async def test_a_backlog_is_applied_in_one_transaction_and_logged_once(store: Store) -> None:
    stored, logs = await drain_backlog(store, Counter(), [signal(n) for n in range(5)])
    assert applied(store) == [s.id for s in stored]
    assert delivered_lines(logs) == [(5, stored[0].id, stored[-1].seq)]
    assert [line for line in logs if line["log_level"] in ("warning", "error")] == []
    for one in stored:
        assert store.read_sync(lambda tx, i=one.id: tx.signals.status(i)) == {
            "counter": "delivered"
        }


@pytest.mark.asyncio
async def test_a_backlog_is_applied_in_transactions_of_at_most_the_bus_batch_size(
    store: Store,
) -> None:
    create_applied_table(store)
    stored = await backlog_of(store, "counter", [signal(n) for n in range(7)])
    with structlog.testing.capture_logs() as logs:
        async with SignalBus(store, [Counter()], retry=FAST, batch_size=3) as bus:
            with anyio.fail_after(10):
                await drained(bus)
    assert applied(store) == [s.id for s in stored]
    assert [count for count, _, _ in delivered_lines(logs)] == [3, 3, 1]


@pytest.mark.asyncio
@pytest.mark.parametrize("poisoned", [0, 2])
async def test_a_poisoned_signal_in_a_backlog_holds_back_only_itself(
    store: Store, poisoned: int
) -> None:
    # The ones before it are applied together again without it; it goes dead on its own;
    # the ones after it follow in order.
    backlog = [signal(n, payload={"poison": n == poisoned}) for n in range(5)]
    stored, logs = await drain_backlog(store, PoisonAware(), backlog)
    assert applied(store) == [s.id for n, s in enumerate(stored) if n != poisoned]
    complaints = [
        (line["event"], line["signal_id"], line["outcome"], line["error"])
        for line in logs
        if line["log_level"] in ("warning", "error")
    ]
    assert complaints == [
        ("delivery failed", stored[poisoned].id, "dead", "payload.poison: refused")
    ]
    before, after = stored[:poisoned], stored[poisoned + 1 :]
    assert delivered_lines(logs) == [
        (len(part), part[0].id, part[-1].seq) for part in (before, after) if part
    ]
    statuses = [store.read_sync(lambda tx, i=s.id: tx.signals.status(i)) for s in stored]
    assert [s["counter"] for s in statuses] == [
        "dead" if n == poisoned else "delivered" for n in range(5)
    ]


class OtherFlaky(Flaky):
    key: ClassVar[str] = "other_flaky"


@pytest.mark.asyncio
async def test_a_retry_for_one_receptor_leaves_the_others_dead(store: Store) -> None:
    one, other = Flaky(failures=10**6), OtherFlaky(failures=10**6)
    async with SignalBus(store, [one, other], retry=FAST) as bus:
        stored = await bus.emit(signal())
        assert await wait_for(bus, stored.id) == {"flaky": "dead", "other_flaky": "dead"}
        one.failures = other.failures = 0  # both faults fixed; only one is retried
        assert await bus.retry(stored.id, receptor="flaky") == ["flaky"]
        assert await wait_for(bus, stored.id) == {"flaky": "delivered", "other_flaky": "dead"}
        assert await bus.retry(stored.id, receptor="flaky") == []


@pytest.mark.asyncio
async def test_emit_raw_judges_the_time_by_the_bus_clock(store: Store) -> None:
    # A year from now by the bus's clock: a signal from a minute before that is on time,
    # one from ten minutes after it is from the future.
    later = datetime.now(UTC) + timedelta(days=365)

    def emitted(at: datetime) -> dict[str, Any]:
        return {"type": "test.ping", "source_id": "tester", "emitted_at": at.isoformat()}

    async with SignalBus(store, [], clock=lambda: later) as bus:
        stored = await bus.emit_raw(emitted(later - timedelta(minutes=1)))
        assert not stored.duplicate
        with pytest.raises(SignalRejected) as exc:
            await bus.emit_raw(emitted(later + timedelta(minutes=10)))
        assert [e.field for e in exc.value.errors] == ["emitted_at"]


class HeldOnRetry(Flaky):
    """Fails once; holds its second attempt until released, so the failure can be read."""

    def __init__(self) -> None:
        super().__init__(failures=1)
        self.retrying = anyio.Event()
        self.release = anyio.Event()

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        if delivery.attempt == 2:
            self.retrying.set()
            await self.release.wait()
        await super().deliver(signal, delivery)


@pytest.mark.asyncio
async def test_a_failed_attempt_is_logged_and_scheduled_by_the_bus_clock(store: Store) -> None:
    flaky = HeldOnRetry()
    policy = RetryPolicy(max_attempts=3, base_delay=0.2, max_delay=0.2)
    with structlog.testing.capture_logs() as logs:
        async with SignalBus(store, [flaky], retry=policy, clock=lambda: T0) as bus:
            stored = await bus.emit(signal())
            with anyio.fail_after(10):
                await flaky.retrying.wait()
            [pending] = store.read_sync(lambda tx: tx.signals.get(stored.id)).deliveries  # type: ignore[union-attr]
            shown = store.read_sync(lambda tx: tx.signals.get(stored.id).to_json())  # type: ignore[union-attr]
            flaky.release.set()
            assert await wait_for(bus, stored.id) == {"flaky": "delivered"}
    [failed] = [line for line in logs if line["event"] == "delivery failed"]
    assert (failed["receptor"], failed["attempt"], failed["outcome"]) == ("flaky", 1, "retrying")
    assert failed["signal_type"] == "test.ping"
    # The worker waited out the delay itself: its loop did not fail and fall back on the
    # store's pause.
    assert not [line for line in logs if line["event"] == "delivery loop error"]
    assert 0.1 <= failed["retry_in"] <= 0.2  # half the ceiling, plus jitter up to the other half
    assert (pending.status, pending.attempts, pending.last_error) == (
        "pending",
        1,
        "transient failure 1",
    )
    assert pending.next_attempt_at == T0 + timedelta(seconds=failed["retry_in"])
    assert shown["deliveries"][0]["next_attempt_at"] == iso(pending.next_attempt_at)  # API, CLI
    assert flaky.attempts == [1, 2]


def test_retry_delays_double_up_to_the_ceiling_with_jitter_in_the_upper_half() -> None:
    policy = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=5.0)
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (5, 5.0)]:
        delays = [policy.delay(attempt) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays), attempt
        # Spread over the whole upper half: 200 draws all missing its top or bottom tenth
        # would happen once in 10^19 runs.
        assert min(delays) < 0.6 * ceiling and max(delays) > 0.9 * ceiling, attempt


class NoBatches(Counter):
    """Its batches fail for a reason of its own, not a signal's: each is applied alone."""

    def apply_batch(self, tx: Tx, signals: Sequence[Signal]) -> None:
        if len(signals) > 1:
            raise RuntimeError("batches are broken here")
        super().apply_batch(tx, signals)


@pytest.mark.asyncio
async def test_a_batch_that_breaks_without_naming_a_signal_is_applied_one_by_one(
    store: Store,
) -> None:
    stored, logs = await drain_backlog(store, NoBatches(), [signal(n) for n in range(3)])
    assert applied(store) == [s.id for s in stored]
    assert delivered_lines(logs) == [(1, s.id, s.seq) for s in stored]


class PoisonedNoBatches(NoBatches, PoisonAware):
    """Batches break for a reason of their own, and one signal breaks on its own too."""


@pytest.mark.asyncio
async def test_a_signal_failing_alone_in_a_broken_batch_is_recorded_and_holds_back_the_rest(
    store: Store,
) -> None:
    backlog = [signal(n, payload={"poison": n == 1}) for n in range(4)]
    stored, logs = await drain_backlog(store, PoisonedNoBatches(), backlog)
    assert applied(store) == [stored[0].id, stored[2].id, stored[3].id]
    assert [
        (line["signal_id"], line["outcome"]) for line in logs if line["log_level"] == "warning"
    ] == [(stored[1].id, "dead")]
    assert delivered_lines(logs) == [(1, s.id, s.seq) for n, s in enumerate(stored) if n != 1]


class CommitsTwice(Receptor):
    key: ClassVar[str] = "twice"
    binds: ClassVar[frozenset[str]] = frozenset({"test.ping"})

    def __init__(self) -> None:
        self.seen_checkpoints: list[Any] = []
        self.second: BaseException | None = None

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        await delivery.save_checkpoint({"step": 1})
        self.seen_checkpoints.append(delivery.checkpoint)
        await delivery.commit(lambda tx: None)
        try:
            await delivery.commit(lambda tx: None)
        except RuntimeError as exc:
            self.second = exc


@pytest.mark.asyncio
async def test_a_delivery_commits_once_and_sees_the_checkpoint_it_saved(store: Store) -> None:
    receptor = CommitsTwice()
    async with SignalBus(store, [receptor], retry=FAST) as bus:
        stored = await bus.emit(signal())
        assert await wait_for(bus, stored.id) == {"twice": "delivered"}
    assert receptor.seen_checkpoints == [{"step": 1}]
    assert str(receptor.second) == "a delivery is committed once"


@pytest.mark.asyncio
async def test_a_fleet_daemon_logs_what_it_takes_over_and_a_renewal_that_fails(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lines an operator of a fleet watches: which receptors a daemon owns once it takes
    them over, and a lease renewal that failed (what it holds will then expire)."""
    upgrade(postgres_url)
    store = Store(postgres_url)
    store.start()
    try:
        first = SignalBus(store, [Counter()], owner="first", lease_seconds=0.6)
        second = SignalBus(store, [Counter()], owner="second", lease_seconds=0.6)
        renew = second._leases.renew
        took_over, failed_once = anyio.Event(), anyio.Event()

        async def renew_then_fail() -> frozenset[str]:
            if took_over.is_set():
                failed_once.set()
                raise ConnectionError("the store is away")
            owned = await renew()
            if owned:
                took_over.set()
            return owned

        monkeypatch.setattr(second._leases, "renew", renew_then_fail)
        with structlog.testing.capture_logs() as logs:
            async with first, second:
                await first.close()  # gives its lease up: the second's next renewal takes it
                with anyio.fail_after(20):
                    await failed_once.wait()
    finally:
        store.close()
    owned = [line for line in logs if line["event"] == "receptors owned"]
    assert [(line["owner"], line["owned"]) for line in owned] == [("second", ["counter"])]
    failed = next(line for line in logs if line["event"] == "lease renewal failed")
    assert (failed["log_level"], failed["error"]) == (
        "error",
        "ConnectionError('the store is away')",
    )


@pytest.mark.asyncio
async def test_a_fleet_daemon_hears_of_an_append_made_by_another(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An emit accepted by one daemon wakes the receptor's owner on another through
    LISTEN/NOTIFY, long before the owner's next lease renewal (a third of a minute here)
    would have made it look."""
    upgrade(postgres_url)
    owner_store, other_store = Store(postgres_url), Store(postgres_url)
    owner_store.start()
    other_store.start()
    create_applied_table(owner_store)
    read, idle = owner_store.read, anyio.Event()

    async def read_telling_when_idle(query: Any) -> Any:
        found = await read(query)
        if isinstance(found, tuple) and found[1] == []:  # the worker found nothing to do
            idle.set()
        return found

    monkeypatch.setattr(owner_store, "read", read_telling_when_idle)
    try:
        owner = SignalBus(owner_store, [Counter()], owner="owner", lease_seconds=60)
        other = SignalBus(other_store, [Counter()], owner="other", lease_seconds=60)
        async with owner, other:
            assert (owner.owned, other.owned) == ({"counter"}, frozenset())
            with anyio.fail_after(10):
                await idle.wait()  # from here on, only a wake-up makes it look again
            stored = await other.emit(signal())
            with anyio.fail_after(10):
                assert await owner.settled(stored.id) == {"counter": "delivered"}
    finally:
        owner_store.close()
        other_store.close()
    assert applied(owner_store) == [stored.id]


class Broken(Counter):
    """A store receptor whose every application fails, for no signal's fault."""

    key: ClassVar[str] = "broken"

    def apply(self, tx: Tx, signal: Signal) -> None:
        raise RuntimeError("broken")

    def apply_batch(self, tx: Tx, signals: Sequence[Signal]) -> None:
        raise RuntimeError("broken")


@pytest.mark.asyncio
async def test_a_store_receptor_failing_in_the_emit_leaves_the_others_applied(
    store: Store,
) -> None:
    create_applied_table(store)
    async with SignalBus(store, [Broken(), Counter()], retry=FAST) as bus:
        stored = await bus.emit(signal())
        assert applied(store) == [stored.id], "the counter applied it in the emit's commit"
        with anyio.fail_after(10):
            assert await bus.settled(stored.id) == {"broken": "dead", "counter": "delivered"}


@pytest.mark.asyncio
async def test_emits_before_a_poisoned_one_in_the_same_commit_are_applied_in_it(
    store: Store,
) -> None:
    """Three emits queued behind a busy writer share one commit; the middle one breaks the
    receptor's contract: the first is applied in that commit all the same, and only the
    poisoned one and the one after it are left to the receptor's worker."""
    create_applied_table(store)
    entered, release = threading.Event(), threading.Event()

    def hold_the_writer(tx: Tx) -> None:
        entered.set()
        release.wait(10)

    with structlog.testing.capture_logs() as logs:
        async with SignalBus(store, [PoisonAware()], retry=FAST) as bus:
            held = asyncio.create_task(store.write(hold_the_writer))
            assert await anyio.to_thread.run_sync(entered.wait, 10)
            emits = [
                asyncio.create_task(bus.emit(signal(n, payload={"poison": n == 1})))
                for n in range(3)
            ]
            await asyncio.sleep(0)  # each emit runs up to its wait: all three are queued
            release.set()
            await held
            stored = [await emit for emit in emits]
            assert applied(store) == [stored[0].id], "applied when its emit returned"
            with anyio.fail_after(10):
                await drained(bus)
    assert applied(store) == [stored[0].id, stored[2].id]
    assert delivered_lines(logs) == [(1, stored[2].id, stored[2].seq)]
    stored_lines = [line["count"] for line in logs if line["event"] == "signals stored"]
    assert stored_lines == [3], "one commit"


def test_the_retry_policy_decides_when_to_try_again_and_when_to_give_up() -> None:
    policy = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=1.0)
    decision = policy.decide(RuntimeError("flaky"), 1, T0)
    assert decision is not None and 0.5 <= decision.delay <= 1.0
    assert decision.retry_at == T0 + timedelta(seconds=decision.delay)
    assert policy.decide(RuntimeError("flaky"), 3, T0) is None  # the last attempt failed
    assert policy.decide(Undeliverable("never"), 1, T0) is None  # retrying cannot help


@pytest.mark.asyncio
async def test_instants_are_stored_in_utc_whatever_the_machines_time_zone(store: Store) -> None:
    """The emit's own insert writes SQLite's instants as text: a machine in Berlin must not
    store its local time as UTC."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Berlin"
    time.tzset()
    try:
        async with SignalBus(store, [Recorder(store)], clock=lambda: T0) as bus:
            stored = await bus.emit(signal())
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()
    read = store.read_sync(lambda tx: tx.signals.get(stored.id))
    assert read is not None and read.stored_at == T0


@pytest.mark.asyncio
async def test_closing_a_bus_twice_stops_it_once(store: Store) -> None:
    with structlog.testing.capture_logs() as logs:
        async with SignalBus(store, [Recorder(store)]) as bus:
            await bus.close()
            assert not bus.accepting
        # the context's exit closed it again: nothing more happened
    assert [line["event"] for line in logs].count("bus stopped") == 1


@pytest.mark.asyncio
async def test_a_delivery_loop_that_fails_says_so_and_goes_on(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store failed under a worker (not a receptor): the error is logged for its
    receptor, the worker pauses, then delivers."""
    from daemon.bus import workers

    failures = [OperationalError("SELECT", {}, Exception("disk I/O error"))]
    next_deliveries = workers.Worker._next

    def flaky_next(self: workers.Worker, tx: Tx) -> Any:
        if failures:
            raise failures.pop()
        return next_deliveries(self, tx)

    monkeypatch.setattr(workers.Worker, "_next", flaky_next)
    recorder = Recorder(store)
    with structlog.testing.capture_logs() as logs:
        async with SignalBus(store, [recorder], retry=FAST) as bus:
            stored = await bus.emit(signal())
            assert await wait_for(bus, stored.id) == {"recorder": "delivered"}
    [error] = [line for line in logs if line["event"] == "delivery loop error"]
    assert (error["log_level"], error["receptor"]) == ("error", "recorder")
    assert "disk I/O error" in error["error"]
