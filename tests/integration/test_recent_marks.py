"""The writer's mirror of each subject's recent marks (what the near-copy check compares a
new observation with) agrees with the store after every kind of change, and spares the
store's read while it knows the subject."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from test_marks_store import T0, make_mark

from daemon.core.records import Reinforcement
from daemon.store import Store, Tx
from daemon.store.fast_path import Raw
from daemon.store.recent_marks import mirror_of
from receptors.near_copies import CANDIDATES_PER_SUBJECT

SUBJECTS = ("user.food", "user.sleep", "user.work")


def recent(tx: Tx, subject: str) -> list[tuple[str, str]]:
    return tx.marks.recent_texts("w", subject, CANDIDATES_PER_SUBJECT)


async def assert_writer_agrees(store: Store) -> None:
    """What the writer's transaction sees (the mirror, where it knows) is what a reader's
    query of the store finds."""
    for subject in SUBJECTS:
        seen = await store.write(lambda tx, s=subject: recent(tx, s))
        assert seen == store.read_sync(lambda tx, s=subject: recent(tx, s)), subject


class Undone(Exception):
    pass


def rolled_back(job: Callable[[Tx], Any]) -> Callable[[Tx], None]:
    def run(tx: Tx) -> None:
        job(tx)
        raise Undone

    return run


def in_savepoint_undone(job: Callable[[Tx], Any], subject: str) -> Callable[[Tx], None]:
    def run(tx: Tx) -> None:
        recent(tx, subject)  # (known to the mirror inside the transaction)
        try:
            with Raw(tx.connection).savepoint("test"):
                job(tx)
                raise Undone
        except Undone:
            pass
        recent(tx, subject)

    return run


@pytest.mark.asyncio
async def test_the_writer_sees_each_subjects_recent_marks_as_the_store_holds_them(
    store: Store,
) -> None:
    rng = random.Random(7)
    made: list[str] = []

    def new_mark(tx: Tx) -> None:
        at = T0 + timedelta(minutes=rng.randrange(10_000))
        mark_id = f"mk_{len(made):04d}"
        made.append(mark_id)
        subject = rng.choice(SUBJECTS)
        tx.marks.insert(
            [
                make_mark(
                    mark_id,
                    subject,
                    observation=f"text {mark_id}",
                    first_observed_at=at,
                    last_reinforced_at=at,
                )
            ]
        )

    def reinforce(tx: Tx) -> None:
        found = tx.marks.get_many([rng.choice(made)])
        if not found:
            return  # (made in a transaction rolled back)
        (mark,) = found
        at = T0 + timedelta(minutes=rng.randrange(-2_000, 12_000))  # evidence may be older
        boost = Reinforcement(
            id=f"rf_{rng.random()}",
            mark_id=mark.id,
            reinforced_at=at,
            reinforced_by="tester",
            evidence={},
            strength_delta=0.1,
        )
        tx.marks.reinforce([(mark, boost)])

    def change_state(tx: Tx) -> None:
        state = rng.choice(["withered", "promoted", "active", "retracted"])
        tx.marks.set_state([rng.choice(made)], state, T0)

    def forget(tx: Tx) -> None:
        tx.marks.erase([rng.choice(made)], "asked", T0)

    def rewrite(tx: Tx) -> None:
        # No route edits a standing mark's text or subject or moves its reinforcement
        # back; any writer could, and the mirror follows whoever writes.
        raw, mark_id = Raw(tx.connection), rng.choice(made)
        at = raw.instant(T0 + timedelta(minutes=rng.randrange(10_000)))
        (subject,) = raw.execute(
            "SELECT subject FROM memory_marks WHERE id = ?", (mark_id,)
        ).fetchone() or ("user.food",)
        if rng.random() < 0.3:
            subject = rng.choice(SUBJECTS)
        raw.execute(
            "UPDATE memory_marks SET observation = ?, last_reinforced_at = ?, subject = ?"
            " WHERE id = ?",
            (f"new text {rng.random()}", at, subject, mark_id),
        ).close()

    def delete(tx: Tx) -> None:
        raw, mark_id = Raw(tx.connection), rng.choice(made)
        raw.execute("DELETE FROM memory_mark_reinforcements WHERE mark_id = ?", (mark_id,)).close()
        raw.execute("DELETE FROM memory_marks WHERE id = ?", (mark_id,)).close()

    steps = [new_mark] * 5 + [reinforce] * 3 + [change_state, forget, rewrite, delete]
    for _ in range(600):
        job = rng.choice(steps) if len(made) > 3 else new_mark
        how = rng.random()
        if how < 0.1:
            with pytest.raises(Undone):
                await store.write(rolled_back(job))
        elif how < 0.2:
            await store.write(in_savepoint_undone(job, rng.choice(SUBJECTS)))
        else:
            await store.write(job)
        await assert_writer_agrees(store)


def _sqlite_only(store: Store) -> str:
    if store.dialect != "sqlite":
        pytest.skip("the mirror is SQLite's: a fleet's daemons share PostgreSQL's marks")
    assert store.url.startswith("sqlite:///")
    return store.url.removeprefix("sqlite:///")


@pytest.mark.asyncio
async def test_a_subjects_recent_marks_are_read_from_the_store_once_while_the_writer_keeps_them(
    store: Store,
) -> None:
    _sqlite_only(store)
    await store.write(
        lambda tx: tx.marks.insert([make_mark(f"mk_{n}", "user.food") for n in range(30)])
    )
    reads: list[str] = []

    def trace(tx: Tx) -> None:
        def seen(statement: str) -> None:
            if "ORDER BY last_reinforced_at DESC" in statement:
                reads.append(statement)

        tx.connection.connection.driver_connection.set_trace_callback(seen)  # type: ignore[union-attr]

    await store.write(trace)
    for n in range(20):
        new = make_mark(f"mk_new_{n}", "user.food", last_reinforced_at=T0 + timedelta(hours=n))
        await store.write(lambda tx, m=new: (recent(tx, "user.food"), tx.marks.insert([m])))
    assert len(reads) == 1
    await assert_writer_agrees(store)


@pytest.mark.asyncio
async def test_a_mark_another_process_writes_is_seen_by_the_writer(store: Store) -> None:
    path = _sqlite_only(store)
    await store.write(lambda tx: tx.marks.insert([make_mark("mk_a", "user.food")]))
    assert [i for i, _ in await store.write(lambda tx: recent(tx, "user.food"))] == ["mk_a"]
    with sqlite3.connect(path) as other:
        other.execute(
            "UPDATE memory_marks SET state = 'retracted' WHERE id = 'mk_a'"
        )  # no mirror's trigger on this connection
    assert await store.write(lambda tx: recent(tx, "user.food")) == []


@pytest.mark.asyncio
async def test_a_forgotten_marks_text_leaves_the_writers_copy(store: Store) -> None:
    _sqlite_only(store)
    secret = "sees Dr Okafor about migraines"
    await store.write(
        lambda tx: tx.marks.insert(
            [make_mark("mk_a", "user.health", observation=secret), make_mark("mk_b", "user.health")]
        )
    )
    assert secret in [t for _, t in await store.write(lambda tx: recent(tx, "user.health"))]

    def kept(tx: Tx) -> Any:
        mirror = mirror_of(tx.connection)
        assert mirror is not None
        return mirror.get(("w", "user.health"))

    await store.write(lambda tx: tx.marks.erase(["mk_a"], "private", T0))
    assert await store.write(kept) is None  # read from the store again when asked
    assert secret not in [t for _, t in await store.write(lambda tx: recent(tx, "user.health"))]
    assert all(secret not in entry for entry in await store.write(kept) or ())
