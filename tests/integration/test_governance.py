"""Correct, retract, forget: signals a person sends to govern their memory, applied by the
governance receptor; recall hides what no longer stands unless asked for the history."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import create_engine, text
from support import FAST_RETRY, T0, emit_and_settle, last_error, make_signal

from daemon.bus import SignalBus
from daemon.core import likeness
from daemon.core.records import Mark
from daemon.files.compost import Compost
from daemon.files.daily import DailyLog
from daemon.files.substrate import Substrate
from daemon.schema.recall import RecallQuery
from daemon.search import index
from daemon.services.recall import Memory, recall
from daemon.store import Store
from receptors.governance import GovernanceReceptor
from receptors.observation import ObservationReceptor

SECRET_TEXT = "gets migraines on Tuesdays after poor sleep"
OTHER_TEXT = "likes figs with goat cheese"


def observation(subject: str, said: str) -> dict[str, Any]:
    return {"subject": subject, "observation": said, "evidence": {"note": "said so in chat"}}


def memory_of(store: Store, root: Path) -> Memory:
    return Memory(
        store=store,
        substrate=Substrate([]),
        daily=DailyLog(root / "daily"),
        compost=Compost(root / "compost"),
        workspace="default",
        zone=ZoneInfo("UTC"),
    )


def recalled(store: Store, root: Path, about: str, **options: Any) -> list[dict[str, Any]]:
    query = RecallQuery(about=about, layers=("marks",), **options)
    result = recall(query, memory_of(store, root), T0 + timedelta(hours=2))
    marks: list[dict[str, Any]] = result.to_json()["marks"]
    return marks


def bus_for(store: Store) -> SignalBus:
    return SignalBus(store, [ObservationReceptor(), GovernanceReceptor(store)], retry=FAST_RETRY)


async def observe(bus: SignalBus, store: Store, subject: str, said: str, **fields: Any) -> Mark:
    signal = make_signal("memory.observation", observation(subject, said), **fields)
    assert await emit_and_settle(bus, signal) == {"observation": "delivered"}
    mark = store.read_sync(lambda tx: tx.marks.made_by(signal.id))
    assert mark is not None
    return mark


def database_files(directory: Path) -> bytes:
    """The bytes of the database and its -wal and -shm files."""
    return b"".join(
        p.read_bytes() for p in sorted(directory.iterdir()) if p.name.startswith("cambium.db")
    )


def only(store: Store, signal_id: str) -> str | None:
    return last_error(store, signal_id)


@pytest.mark.asyncio
async def test_a_mark_corrected_twice_keeps_its_chain(store: Store, tmp_path: Path) -> None:
    async with bus_for(store) as bus:
        first = await observe(bus, store, "user.sleep.bedtime", "in bed by 23:00")
        second_signal = make_signal(
            "memory.mark_corrected",
            {"mark_id": first.id, "text": "in bed by 22:30", "reason": "moved it earlier"},
            source_id="joshua",
            emitted_at=T0 + timedelta(minutes=1),
        )
        assert await emit_and_settle(bus, second_signal) == {"governance": "delivered"}
        second = Mark.id_for_signal(second_signal.id)
        third_signal = make_signal(
            "memory.mark_corrected",
            {"mark_id": second, "text": "in bed by 22:00", "reason": "earlier still"},
            source_id="joshua",
            emitted_at=T0 + timedelta(minutes=2),
        )
        assert await emit_and_settle(bus, third_signal) == {"governance": "delivered"}
        third = Mark.id_for_signal(third_signal.id)
        # The superseded mark cannot be corrected again: the delivery is dead, naming why.
        stale = make_signal(
            "memory.mark_corrected", {"mark_id": first.id, "text": "x", "reason": "y"}
        )
        assert await emit_and_settle(bus, stale) == {"governance": "dead"}
        assert f"payload.mark_id: mark {first.id} is already superseded by {second}" in str(
            only(store, stale.id)
        )

    now = recalled(store, tmp_path, "user.sleep")
    assert [(m["id"], m["observation"]) for m in now] == [(third, "in bed by 22:00")]
    assert "superseded_by" not in now[0]  # the documented shape, unless history is asked for

    history = {m["id"]: m for m in recalled(store, tmp_path, "user.sleep", include_history=True)}
    assert set(history) == {first.id, second, third}
    assert (history[first.id]["state"], history[first.id]["superseded_by"]) == (
        "superseded",
        second,
    )
    assert history[second]["supersedes"] == first.id
    assert history[second]["superseded_by"] == third
    assert history[third]["supersedes"] == second and history[third]["superseded_by"] is None
    assert history[first.id]["ended_reason"] == "moved it earlier"
    assert history[third]["observed_by"] == "joshua"
    assert store.read_sync(lambda tx: [m.id for m in tx.marks.chain(second)]) == [
        first.id,
        second,
        third,
    ]


@pytest.mark.asyncio
async def test_a_retracted_mark_leaves_recall_but_not_the_history(
    store: Store, tmp_path: Path
) -> None:
    async with bus_for(store) as bus:
        mark = await observe(bus, store, "user.food", OTHER_TEXT)
        retraction = make_signal(
            "memory.mark_retracted", {"mark_id": mark.id, "reason": "it was a joke"}
        )
        assert await emit_and_settle(bus, retraction) == {"governance": "delivered"}
        again = make_signal("memory.mark_retracted", {"mark_id": mark.id, "reason": "twice"})
        assert await emit_and_settle(bus, again) == {"governance": "dead"}
        unknown = make_signal("memory.mark_retracted", {"mark_id": "mk_nope", "reason": "r"})
        assert await emit_and_settle(bus, unknown) == {"governance": "dead"}
        assert "payload.mark_id: no mark mk_nope" in str(only(store, unknown.id))
        # The same text observed again is a new mark, not a revival of the retracted one.
        revived = await observe(
            bus, store, "user.food", OTHER_TEXT, emitted_at=T0 + timedelta(minutes=5)
        )
    assert revived.id != mark.id
    assert [m["id"] for m in recalled(store, tmp_path, "user.food")] == [revived.id]
    history = recalled(store, tmp_path, "user.food", include_history=True)
    [ended] = [m for m in history if m["id"] == mark.id]
    assert (ended["state"], ended["observation"], ended["ended_reason"]) == (
        "retracted",
        OTHER_TEXT,
        "it was a joke",
    )


@pytest.mark.asyncio
async def test_forget_needs_exactly_one_target_and_a_reason(store: Store) -> None:
    async with bus_for(store) as bus:
        for payload, field in (
            ({"reason": "r"}, "payload"),
            ({"subject": "user", "mark_id": "mk_1", "reason": "r"}, "payload"),
            ({"subject": "user.health"}, "payload.reason"),
            ({"subject": "...", "reason": "r"}, "payload.subject"),
        ):
            signal = make_signal("memory.forget", payload)
            assert await emit_and_settle(bus, signal) == {"governance": "dead"}, payload
            assert str(only(store, signal.id)).startswith(field), payload


async def _forget_user_health(store: Store) -> str:
    """Two health marks (one corrected), one unrelated mark; then forget user.health."""
    async with bus_for(store) as bus:
        health = await observe(bus, store, "user.health.migraine", SECRET_TEXT)
        await observe(
            bus, store, "user.health.migraine", SECRET_TEXT, emitted_at=T0 + timedelta(minutes=1)
        )  # a reinforcement: its signal carries the text too
        correction = make_signal(
            "memory.mark_corrected",
            {"mark_id": health.id, "text": SECRET_TEXT + " and Fridays", "reason": "more days"},
            emitted_at=T0 + timedelta(minutes=2),
        )
        assert await emit_and_settle(bus, correction) == {"governance": "delivered"}
        other = await observe(bus, store, "user.food", OTHER_TEXT)
        forget = make_signal(
            "memory.forget",
            {"subject": "user.health", "reason": "private"},
            source_id="joshua",
            emitted_at=T0 + timedelta(minutes=3),
        )
        assert await emit_and_settle(bus, forget) == {"governance": "delivered"}
    assert other.observation == OTHER_TEXT
    return forget.id


@pytest.mark.asyncio
async def test_forget_erases_the_text_and_leaves_a_tombstone(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    before = store.read_sync(lambda tx: len(tx.signals.listing(limit=1000)))
    forget_id = await _forget_user_health(store)

    assert recalled(store, tmp_path, "user.health") == []
    history = recalled(store, tmp_path, "user.health", include_history=True)
    assert len(history) == 2
    assert {(m["state"], m["observation"]) for m in history} == {("forgotten", "")}
    assert all(m["evidence"] == {} for m in history)
    [tombstone] = store.read_sync(lambda tx: tx.tombstones.listing("default"))
    assert (tombstone.target, tombstone.target_kind, tombstone.forgotten_by) == (
        "user.health",
        "subject",
        "joshua",
    )
    assert (tombstone.reason, tombstone.marks_erased, tombstone.signals_erased) == (
        "private",
        2,
        3,  # the observation, its repeat, and the correction
    )
    assert tombstone.signal_id == forget_id
    # The signals still count: every one is in the log, in order; only payloads changed.
    assert store.read_sync(lambda tx: len(tx.signals.listing(limit=1000))) == before + 5
    # Nothing else was touched.
    assert [m["observation"] for m in recalled(store, tmp_path, "user.food")] == [OTHER_TEXT]

    engine = create_engine(db_url)
    try:
        with engine.connect() as connection:
            for table, column in (
                ("signals", "payload"),
                ("memory_marks", "observation"),
                ("memory_marks", "evidence"),
                ("memory_marks", "ended_reason"),
                ("memory_mark_reinforcements", "evidence"),
            ):
                found = connection.execute(
                    text(f"SELECT count(*) FROM {table} WHERE CAST({column} AS TEXT) LIKE :t"),
                    {"t": "%migraines on Tuesdays%"},
                ).scalar()
                assert found == 0, (table, column)
            kept = connection.execute(
                text("SELECT count(*) FROM signals WHERE CAST(payload AS TEXT) LIKE :t"),
                {"t": "%figs with goat cheese%"},
            ).scalar()
            assert kept == 1
    finally:
        engine.dispose()


@pytest.mark.asyncio
async def test_forgotten_text_is_gone_from_the_sqlite_files(tmp_path: Path) -> None:
    from daemon.store.migrate import upgrade

    path = tmp_path / "cambium.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    store = Store(url)
    store.start()
    try:
        await _forget_user_health(store)
        # The receptor checkpointed and truncated the write-ahead log after the forget.
        on_disk = database_files(tmp_path)
    finally:
        store.close()
    assert SECRET_TEXT.encode() not in on_disk
    assert b"migraines" not in on_disk
    assert OTHER_TEXT.encode() in on_disk  # the search would find text that is there
    # And after a full VACUUM too (nothing hides in pages SQLite could reuse).
    import sqlite3

    connection = sqlite3.connect(path)
    connection.execute("VACUUM")
    connection.close()
    assert b"migraines" not in path.read_bytes()


@pytest.mark.asyncio
async def test_forget_one_mark_takes_its_corrections_with_it(store: Store, tmp_path: Path) -> None:
    async with bus_for(store) as bus:
        kept = await observe(bus, store, "user.health.sleep", "sleeps eight hours")
        mark = await observe(bus, store, "user.health.migraine", SECRET_TEXT)
        correction = make_signal(
            "memory.mark_corrected",
            {"mark_id": mark.id, "text": "no more migraines", "reason": "better now"},
        )
        await emit_and_settle(bus, correction)
        forget = make_signal("memory.forget", {"mark_id": mark.id, "reason": "private"})
        assert await emit_and_settle(bus, forget) == {"governance": "delivered"}
        missing = make_signal("memory.forget", {"mark_id": "mk_nope", "reason": "r"})
        assert await emit_and_settle(bus, missing) == {"governance": "dead"}
    [tombstone] = store.read_sync(lambda tx: tx.tombstones.listing("default"))
    assert (tombstone.target_kind, tombstone.marks_erased) == ("mark", 2)
    assert [m["id"] for m in recalled(store, tmp_path, "user.health")] == [kept.id]


@pytest.mark.asyncio
async def test_forgetting_a_mark_keeps_what_made_another_that_repeats_its_words(
    store: Store, tmp_path: Path
) -> None:
    async with bus_for(store) as bus:
        forgotten = await observe(bus, store, "user.food.lunch", "likes lentil soup")
        kept = await observe(bus, store, "user.food.lunch", "likes lentil soup a lot")
        forget = make_signal("memory.forget", {"mark_id": forgotten.id, "reason": "wrong"})
        assert await emit_and_settle(bus, forget) == {"governance": "delivered"}
    [tombstone] = store.read_sync(lambda tx: tx.tombstones.listing("default"))
    assert (tombstone.marks_erased, tombstone.signals_erased) == (1, 1)
    [made_it] = kept.evidence["signal_ids"]
    stored = store.read_sync(lambda tx: tx.signals.get(made_it))
    assert stored is not None
    assert stored.signal.payload["observation"] == "likes lentil soup a lot"
    assert [m["observation"] for m in recalled(store, tmp_path, "user.food")] == [
        "likes lentil soup a lot"
    ]


@pytest.mark.asyncio
async def test_forget_empties_the_processs_caches_of_words(store: Store) -> None:
    async with bus_for(store) as bus:
        mark = await observe(bus, store, "user.health.migraine", SECRET_TEXT)
        # The near-copy check remembered the text's words.
        await observe(bus, store, "user.health.migraine", SECRET_TEXT + " again")
        assert likeness._words.characters > 0
        forget = make_signal("memory.forget", {"mark_id": mark.id, "reason": "private"})
        assert await emit_and_settle(bus, forget) == {"governance": "delivered"}
    assert likeness._words.characters == 0
    assert index._counts.cache_info().currsize == 0


@pytest.mark.asyncio
async def test_free_text_no_longer_finds_a_forgotten_mark(store: Store, tmp_path: Path) -> None:
    """The daemon's in-memory text index drops what was forgotten: the same long-lived
    layers that found the mark by a word of its text find nothing afterwards, even when
    the history is asked for."""
    memory = memory_of(store, tmp_path)
    at = T0 + timedelta(hours=2)

    def search(**options: Any) -> list[str]:
        query = RecallQuery(about="migraines", layers=("marks",), **options)
        return [h.mark.id for h in recall(query, memory, at).marks]

    async with bus_for(store) as bus:
        mark = await observe(bus, store, "user.health.migraine", SECRET_TEXT)
        assert search() == [mark.id]
        forget = make_signal("memory.forget", {"subject": "user.health", "reason": "private"})
        assert await emit_and_settle(bus, forget) == {"governance": "delivered"}
    assert search() == []
    assert search(include_history=True) == []
    assert store.read_sync(lambda tx: tx.text_index.candidates("marks", ["migrain"], 10)) == []
