"""The lean bus schema (0011) keeps every row of a store written at 0008, and every answer
read from them: signals, cursors (with a fleet's lease), failures (pending, dead, with a
checkpoint), marks (made, reinforced, forgotten) and the marks waiting to be indexed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import create_engine, inspect, text
from support import T0, make_signal

from daemon.core.records import Mark, Reinforcement, derived_id
from daemon.store import NewSignal, Store, Tx
from daemon.store.migrate import current_revision, upgrade

LATER = T0 + timedelta(minutes=5)
TABLES = {
    "signals": "seq",
    "receptor_cursors": "receptor",
    "delivery_failures": "receptor, seq",
    "memory_marks": "id",
    "memory_mark_reinforcements": "id",
    "text_pending": "mark_id",
}


def observation(n: int, subject: str = "user.food", text: str = "") -> Any:
    payload = {
        "subject": subject,
        "observation": text or f"likes fig number {n}",
        "evidence": {"note": "said so"},
    }
    return make_signal("memory.observation", payload, source_id=f"agent-{n}")


def mark_of(signal: Any, subject: str, text: str) -> Mark:
    return Mark.observed(
        signal,
        id=derived_id("mk", signal.id),  # as releases before time-ordered mark ids made them
        subject=subject,
        observation=text,
        evidence={"signal_ids": [signal.id]},
        initial_strength=0.7,
        half_life_days=14.0,
    )


def fill(tx: Tx) -> None:
    """At 0008: a log of five signals, three receptors part way through it (one holding a
    lease), a dead and a retrying delivery with its checkpoint, and the marks the
    observations made, one reinforced, one forgotten."""
    signals = [observation(1), observation(2), observation(3, "user.sleep", "sleeps late")]
    signals += [make_signal("test.ping", {"n": 4}), make_signal("test.other", {"n": 5})]
    tx.signals.append([NewSignal(s, LATER) for s in signals])
    for receptor, binds in (("observation", {"memory.observation"}), ("ping", {"test.ping"})):
        tx.signals.register(receptor, binds, T0)
    tx.connection.execute(text("UPDATE receptor_cursors SET since = 0, position = 0"))
    tx.signals.register("other", {"test.other"}, T0)
    assert tx.signals.take_lease("ping", "daemon-a", T0, T0 + timedelta(seconds=15))
    position, [first, *_] = tx.signals.next_deliveries("observation", 10)
    tx.signals.record_failure(first, position, "it broke", T0, retry_at=None)
    position, [ping] = tx.signals.next_deliveries("ping", 10)
    tx.signals.save_checkpoint(ping, {"step": 2}, T0)
    tx.signals.record_failure(ping, position, "try again", T0, retry_at=LATER)
    made = [mark_of(s, s.payload["subject"], s.payload["observation"]) for s in signals[1:3]]
    tx.marks.insert(made)
    boost = Reinforcement.of(made[0], signals[0], evidence={"note": "again"}, delta=0.2)
    tx.marks.reinforce([(made[0], boost)])
    tx.marks.erase([made[1].id], "asked to", LATER)


def rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return {
                table: [
                    tuple(row)
                    for row in connection.execute(text(f"SELECT * FROM {table} ORDER BY {key}"))
                ]
                for table, key in TABLES.items()
            }
    finally:
        engine.dispose()


def answers(store: Store) -> dict[str, Any]:
    def read(tx: Tx) -> dict[str, Any]:
        listing = tx.signals.listing(limit=10)
        return {
            "listing": [s.to_json() for s in listing],
            "shown": [tx.signals.get(s.id).to_json() for s in listing],  # type: ignore[union-attr]
            "cursors": tx.signals.cursors(),
            "counts": tx.signals.open_counts(),
            "dead": [s.id for s in tx.signals.listing(status="dead")],
            "marks": [m.id for m in tx.marks.find("default", "user", states=("active",))],
            "forgotten": tx.marks.forgotten_ids(),
            "repeat": tx.marks.recent_texts("default", "user.food", 10),
            "made by": [getattr(tx.marks.made_by(s.id), "id", None) for s in listing],
        }

    return store.read_sync(read)


def test_a_0008_store_keeps_every_row_and_answer_through_the_lean_schema(db_url: str) -> None:
    upgrade(db_url, "0008")
    store = Store(db_url)
    try:
        store.write_sync(fill)
        before = answers(store)
    finally:
        store.close()
    stored = rows(db_url)
    assert all(stored.values()), "every table holds rows to keep"
    assert len(set(before["made by"]) - {None}) == 2, "the marks' signals find them"

    upgrade(db_url, "0011")

    assert current_revision(db_url) == "0011"
    assert rows(db_url) == stored
    store = Store(db_url)
    try:
        assert answers(store) == before
    finally:
        store.close()
    engine = create_engine(db_url)
    try:
        indexes = {i["name"] for i in inspect(engine).get_indexes("memory_marks")}
        assert "ix_memory_marks_workspace_subject_fingerprint" in indexes
        assert indexes & {"ix_memory_marks_workspace_subject"} == set()
        assert "ix_signals_type_seq" not in {
            i["name"] for i in inspect(engine).get_indexes("signals")
        }
    finally:
        engine.dispose()
