"""A child process for crash tests: emits signals through an in-process bus (whose
idempotent ``Counter`` receptor applies them as they arrive) and prints ``ack <id>`` the
moment each emit is acknowledged, so the parent knows what was promised before SIGKILL.

Usage: python emitter_process.py DB_URL COUNT CONCURRENCY
"""

from __future__ import annotations

import sys
from typing import ClassVar

import anyio
from sqlalchemy import text

from daemon.bus import SignalBus, StoreReceptor
from daemon.core.signal import Signal
from daemon.logs import configure_logging
from daemon.store import Store, Tx


class Counter(StoreReceptor):
    """Inserts one row per application: a duplicate application shows as a repeated id."""

    key: ClassVar[str] = "counter"
    binds: ClassVar[frozenset[str]] = frozenset({"test.ping"})

    def apply(self, tx: Tx, signal: Signal) -> None:
        tx.connection.execute(
            text("INSERT INTO test_applied (signal_id) VALUES (:id)"), {"id": signal.id}
        )


def create_applied_table(store: Store) -> None:
    store.write_sync(
        lambda tx: tx.connection.execute(
            text("CREATE TABLE IF NOT EXISTS test_applied (signal_id VARCHAR(128) NOT NULL)")
        )
    )


def applied(store: Store) -> list[str]:
    return list(
        store.read_sync(
            lambda tx: tx.connection.execute(text("SELECT signal_id FROM test_applied")).scalars()
        )
    )


async def emit_all(url: str, count: int, concurrency: int) -> None:
    store = Store(url)
    store.start()
    async with SignalBus(store, [Counter()]) as bus:

        async def emitter(start: int) -> None:
            for n in range(start, count, concurrency):
                stored = await bus.emit(
                    Signal.parse({"type": "test.ping", "source_id": "crash", "payload": {"n": n}})
                )
                print(f"ack {stored.id}", flush=True)

        async with anyio.create_task_group() as tg:
            for start in range(concurrency):
                tg.start_soon(emitter, start)
    store.close()


if __name__ == "__main__":
    configure_logging("warning")  # stdout carries the acks, and nothing else
    anyio.run(emit_all, sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
