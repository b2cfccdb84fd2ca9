"""Upgrading a database written by an earlier release keeps everything in it."""

from __future__ import annotations

import contextlib
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from daemon.store import Store
from daemon.store.migrate import (
    alembic_config,
    alembic_head,
    current_revision,
    head_revision,
    upgrade,
    upgrade_in_child_process,
)

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_a_wave_one_database_upgrades_with_its_marks_intact(db_url: str) -> None:
    upgrade(db_url, "0001")
    engine = create_engine(db_url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO memory_marks (id, workspace_id, subject, observation, fingerprint,"
                " evidence, initial_strength, decay_rate, observed_by, first_observed_at,"
                " last_reinforced_at, reinforcement_count, affinity, substrate_refs, state,"
                " created_at, updated_at) VALUES ('mk_1', 'default', 'user.food', 'likes figs',"
                " 'f', '{\"note\": \"n\"}', 0.8, 7.0, 'ada', :t, :t, 0, '[]', '[]', 'active',"
                " :t, :t)"
            ),
            {"t": T0.replace(tzinfo=None)},
        )
    engine.dispose()

    upgrade(db_url)

    assert current_revision(db_url) == head_revision()
    store = Store(db_url)
    try:
        mark = store.read_sync(lambda tx: tx.marks.get("mk_1"))
    finally:
        store.close()
    assert mark is not None
    assert mark.half_life_days == 7.0
    assert (mark.subject, mark.observation, mark.initial_strength) == (
        "user.food",
        "likes figs",
        0.8,
    )
    # The subject index (NOCASE on SQLite) still serves prefix queries after the rename.
    store = Store(db_url)
    try:
        found = store.read_sync(lambda tx: tx.marks.find("default", "user"))
    finally:
        store.close()
    assert [m.id for m in found] == ["mk_1"]


def test_a_database_at_0002_gains_governance_with_its_rows_intact(db_url: str) -> None:
    upgrade(db_url, "0002")
    engine = create_engine(db_url)
    t = T0.replace(tzinfo=None)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO memory_marks (id, workspace_id, subject, observation, fingerprint,"
                " evidence, initial_strength, half_life_days, observed_by, first_observed_at,"
                " last_reinforced_at, reinforcement_count, affinity, substrate_refs, state,"
                " created_at, updated_at) VALUES ('mk_1', 'default', 'user.food', 'likes figs',"
                " 'f', '{\"note\": \"n\"}', 0.8, 7.0, 'ada', :t, :t, 0, '[]', '[]', 'promoted',"
                " :t, :t)"
            ),
            {"t": t},
        )
        connection.execute(
            text(
                "INSERT INTO memory_seeds (id, workspace_id, subject, proposed_change,"
                " target_file, based_on_marks, planted_at, planted_by, state, reviewed_at,"
                " reviewed_by, created_at, updated_at) VALUES ('sd_1', 'default', 'user.food',"
                " 'add figs', 'USER.md', '[\"mk_1\"]', :t, 'agent', 'accepted', :t, 'ada', :t, :t)"
            ),
            {"t": t},
        )
    engine.dispose()

    upgrade(db_url)

    assert current_revision(db_url) == head_revision() == "0013"
    store = Store(db_url)
    try:
        mark = store.read_sync(lambda tx: tx.marks.get("mk_1"))
        seed = store.read_sync(lambda tx: tx.seeds.get("sd_1", "default"))
        tombstones = store.read_sync(lambda tx: tx.tombstones.listing("default"))
    finally:
        store.close()
    assert mark is not None and seed is not None
    assert (mark.state, mark.observation, mark.half_life_days) == ("promoted", "likes figs", 7.0)
    assert (mark.supersedes, mark.superseded_by, mark.ended_at, mark.ended_reason) == (
        None,
        None,
        None,
        None,
    )
    assert mark.current
    assert (seed.state, seed.based_on_marks, seed.reviewed_by, seed.withered_at) == (
        "accepted",
        ["mk_1"],
        "ada",
        None,
    )
    assert seed.reviewed_at == T0
    assert tombstones == []


def test_a_wave_one_log_upgrades_to_cursors_keeping_every_delivery(db_url: str) -> None:
    """Signals and their per-receptor delivery rows, written as wave 1 wrote them, come out
    of the upgrade with the same status, attempts, errors and checkpoints, in the same order;
    what was pending is delivered after the upgrade, what was settled is not."""
    upgrade(db_url, "0004")
    engine = create_engine(db_url)
    t = T0.replace(tzinfo=None)
    # (signal, receptor, status, attempts, last_error, checkpoint)
    deliveries = [
        ("s1", "observation", "delivered", 1, None, None),
        ("s2", "observation", "delivered", 3, None, None),  # delivered after two failures
        ("s3", "observation", "dead", 5, "payload.subject: required", None),
        ("s4", "observation", "delivered", 1, None, None),
        ("s5", "observation", "pending", 2, "database is locked", None),
        ("s6", "observation", "pending", 0, None, None),
        ("s7", "daily", "pending", 1, "disk full", '{"position": 12}'),
        ("s8", "daily", "dead", 1, "bad day", None),
    ]
    with engine.begin() as connection:
        for n, (signal_id, receptor, status, attempts, error, checkpoint) in enumerate(deliveries):
            signal_type = "memory.observation" if receptor == "observation" else "memory.daily_note"
            connection.execute(
                text(
                    "INSERT INTO signals (id, type, class, source_layer, source_id, workspace_id,"
                    " intensity, decay_rate, cascade_potential, payload, affinity, emitted_at,"
                    " stored_at, idempotency_key) VALUES (:id, :type, 'knowledge', 'agent', 'ada',"
                    " 'default', 0.7, 0, false, :payload, '[]', :t, :stored, :key)"
                ),
                {
                    "id": signal_id,
                    "type": signal_type,
                    "payload": f'{{"n": {n}}}',
                    "t": t,
                    "stored": t + timedelta(seconds=n),
                    "key": f"key-{n}" if n % 2 else None,
                },
            )
            connection.execute(
                text(
                    "INSERT INTO deliveries (signal_id, receptor, status, attempts, last_error,"
                    " checkpoint, created_at, updated_at, delivered_at) VALUES (:id, :receptor,"
                    " :status, :attempts, :error, :checkpoint, :t, :t, :delivered)"
                ),
                {
                    "id": signal_id,
                    "receptor": receptor,
                    "status": status,
                    "attempts": attempts,
                    "error": error,
                    "checkpoint": checkpoint,
                    "t": t,
                    "delivered": t if status == "delivered" else None,
                },
            )
        connection.execute(  # unrouted: no receptor bound it
            text(
                "INSERT INTO signals (id, type, class, source_layer, source_id, workspace_id,"
                " intensity, decay_rate, cascade_potential, payload, affinity, emitted_at,"
                " stored_at) VALUES ('s9', 'test.unbound', 'knowledge', 'agent', 'ada',"
                " 'default', 0.7, 0, false, '{}', '[]', :t, :stored)"
            ),
            {"t": t, "stored": t + timedelta(seconds=20)},
        )
    engine.dispose()

    upgrade(db_url)

    assert current_revision(db_url) == head_revision() == "0013"
    store = Store(db_url)
    try:
        found = {
            signal_id: store.read_sync(lambda tx, s=signal_id: tx.signals.get(s))
            for signal_id in [d[0] for d in deliveries] + ["s9"]
        }
        observation = store.read_sync(lambda tx: tx.signals.next_deliveries("observation", 10))
        daily = store.read_sync(lambda tx: tx.signals.next_deliveries("daily", 10))
        counts = store.read_sync(lambda tx: tx.signals.open_counts())
        by_key = store.read_sync(lambda tx: tx.signals.listing(limit=100))
    finally:
        store.close()
    for signal_id, receptor, status, attempts, error, _ in deliveries:
        stored = found[signal_id]
        assert stored is not None
        [state] = stored.deliveries
        assert (state.receptor, state.status, state.attempts) == (receptor, status, attempts)
        assert state.last_error == (error if status != "delivered" else None)
    assert found["s9"] is not None and found["s9"].deliveries == [], "still unrouted"
    assert [s.id for s in reversed(by_key)] == [f"s{n}" for n in range(1, 10)], "log order kept"
    assert [(d.signal.id, d.attempts) for d in observation[1]] == [("s5", 2), ("s6", 0)]
    assert [(d.signal.id, d.attempts, d.checkpoint) for d in daily[1]] == [
        ("s7", 1, {"position": 12})
    ]
    assert counts.pending == 3 and counts.dead == 2


def test_a_0005_database_keeps_its_marks_when_marks_lose_their_unused_indexes(
    db_url: str,
) -> None:
    """0006 drops indexes no query uses and replaces the state index by one on forgotten
    marks: the marks are all there, prefix queries still use their index, and the forgotten
    ones are still found."""
    upgrade(db_url, "0005")
    engine = create_engine(db_url)
    with engine.begin() as connection:
        for mark_id, subject, state in [
            ("mk_1", "user.food", "active"),
            ("mk_2", "user.food.fruit", "withered"),
            ("mk_3", "user.sleep", "forgotten"),
        ]:
            connection.execute(
                text(
                    "INSERT INTO memory_marks (id, workspace_id, subject, observation,"
                    " fingerprint, evidence, initial_strength, half_life_days, observed_by,"
                    " first_observed_at, last_reinforced_at, reinforcement_count, affinity,"
                    " substrate_refs, state, provenance, created_at, updated_at) VALUES (:id,"
                    " 'default', :subject, 'something', 'f', '{\"note\": \"n\"}', 0.8, 7.0,"
                    " 'ada', :t, :t, 0, '[]', '[]', :state, 'observed', :t, :t)"
                ),
                {"id": mark_id, "subject": subject, "state": state, "t": T0.replace(tzinfo=None)},
            )
    engine.dispose()

    upgrade(db_url)

    assert current_revision(db_url) == head_revision() == "0013"
    store = Store(db_url)
    try:
        under_food = store.read_sync(
            lambda tx: tx.marks.find("default", "user.food", states=("active", "withered"))
        )
        forgotten = store.read_sync(lambda tx: tx.marks.forgotten_ids())
        every = store.read_sync(lambda tx: tx.marks.all_ids())
    finally:
        store.close()
    assert [m.id for m in under_food] == ["mk_1", "mk_2"]
    assert forgotten == {"mk_3"}
    assert every == {"mk_1", "mk_2", "mk_3"}


def test_a_batch_table_rebuild_runs_inside_the_revision_transaction(db_url: str) -> None:
    """Downgrading 0004 drops columns: on SQLite a batch operation that copies the table
    (create, copy, drop, rename), now inside the one transaction of its revision."""
    from alembic import command

    upgrade(db_url, "0004")
    engine = create_engine(db_url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO memory_marks (id, workspace_id, subject, observation, fingerprint,"
                " evidence, initial_strength, half_life_days, observed_by, first_observed_at,"
                " last_reinforced_at, reinforcement_count, affinity, substrate_refs, state,"
                " provenance, created_at, updated_at, ended_reason) VALUES ('mk_1', 'default',"
                " 'user.food', 'likes figs', 'f', '{\"note\": \"n\"}', 0.8, 7.0, 'ada', :t, :t,"
                " 0, '[]', '[]', 'active', 'stated', :t, :t, 'kept')"
            ),
            {"t": T0.replace(tzinfo=None)},
        )
    command.downgrade(alembic_config(db_url), "0003")
    with engine.connect() as connection:
        row = connection.execute(text("SELECT * FROM memory_marks")).mappings().one()
    engine.dispose()
    assert current_revision(db_url) == "0003"
    assert (row["id"], row["provenance"], row["observation"]) == ("mk_1", "stated", "likes figs")
    assert "ended_reason" not in row


@pytest.mark.asyncio
async def test_the_daemon_s_migration_extends_systemd_s_start_timeout_and_logs_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under systemd (``$NOTIFY_SOCKET``) the daemon pushes its start timeout ahead while
    its migration child runs, and logs each revision the child applies."""
    from structlog.testing import capture_logs

    address = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind(str(address))
        systemd.setblocking(False)
        monkeypatch.setenv("NOTIFY_SOCKET", str(address))
        with capture_logs() as logs:
            await upgrade_in_child_process(f"sqlite:///{tmp_path / 'cambium.db'}")
        told = []
        with contextlib.suppress(BlockingIOError):
            while True:
                told.append(systemd.recv(4096).decode())
    assert f"EXTEND_TIMEOUT_USEC={30 * 1_000_000}" in told
    assert "STATUS=migrating the store" in told
    progress = [entry["progress"] for entry in logs if entry["event"] == "migration"]
    assert [line.split(" applied")[0] for line in progress] == [
        f"revision {revision}" for revision in every_revision()
    ]


def every_revision() -> list[str]:
    """The revisions from the first to the head, in the order they apply."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(alembic_config("sqlite://"))
    return [script.revision for script in reversed(list(scripts.walk_revisions()))]


JAN_FEB_MAR = ((1, 15), (2, 1), (3, 1))


def test_a_0006_database_dates_consolidated_marks_by_their_evidence_day(db_url: str) -> None:
    """0007: what consolidation made from a day's line was dated by the night it ran; it is
    dated at the day's noon (UTC) instead, and a reinforcement that now comes before its
    mark's first observation trades places with it. Marks without a day keep their dates."""
    upgrade(db_url, "0006")
    engine = create_engine(db_url)
    night = T0.replace(tzinfo=None)  # 2026-11-30 12:00, when the consolidations ran
    day = '{{"daily_file": "{}.md", "line_range": [2, 2], "signal_ids": ["s_night"]}}'
    chat = '{"note": "chat", "signal_ids": ["s_chat"]}'
    # (id, evidence, observed_by, first, last, reinforcement_count)
    rows = [
        ("mk_day", day.format("2026-01-15"), "rhythm:consolidation", night, night, 1),
        ("mk_chat", chat, "ada", night - timedelta(days=3), night, 1),
        ("mk_plain", chat, "ada", night - timedelta(days=3), night - timedelta(days=3), 0),
    ]
    # (id, mark_id, evidence, reinforced_by, reinforced_at)
    boosts = [
        ("rf_day", "mk_day", day.format("2026-02-01"), "rhythm:consolidation", night),
        ("rf_chat", "mk_chat", day.format("2026-03-01"), "rhythm:consolidation", night),
    ]
    with engine.begin() as connection:
        for mark_id, evidence, by, first, last, count in rows:
            connection.execute(
                text(
                    "INSERT INTO memory_marks (id, workspace_id, subject, observation,"
                    " fingerprint, evidence, initial_strength, half_life_days, observed_by,"
                    " first_observed_at, last_reinforced_at, reinforcement_count, affinity,"
                    " substrate_refs, state, provenance, created_at, updated_at) VALUES (:id,"
                    " 'default', 'user.food', :id, 'f', :evidence, 0.8, 14.0, :by, :first,"
                    " :last, :count, '[]', '[]', 'active', 'observed', :last, :last)"
                ),
                {"id": mark_id, "evidence": evidence, "by": by, "first": first, "last": last}
                | {"count": count},
            )
        for boost_id, mark_id, evidence, by, at in boosts:
            connection.execute(
                text(
                    "INSERT INTO memory_mark_reinforcements (id, mark_id, reinforced_at,"
                    " reinforced_by, evidence, strength_delta) VALUES (:id, :mark, :at, :by,"
                    " :evidence, 0.2)"
                ),
                {"id": boost_id, "mark": mark_id, "at": at, "by": by, "evidence": evidence},
            )
    engine.dispose()

    upgrade(db_url)

    assert current_revision(db_url) == head_revision() == "0013"
    store = Store(db_url)
    try:
        found = {
            m.id: m
            for m in store.read_sync(
                lambda tx: tx.marks.get_many(["mk_day", "mk_chat", "mk_plain"])
            )
        }
        parts = store.read_sync(lambda tx: tx.marks.reinforcements_of(list(found)))
    finally:
        store.close()
    jan, feb, mar = (datetime(2026, month, day, 12, tzinfo=UTC) for month, day in JAN_FEB_MAR)
    by_day = found["mk_day"]
    assert (by_day.first_observed_at, by_day.last_reinforced_at) == (jan, feb)
    assert [r.reinforced_at for r in parts["mk_day"]] == [feb]
    # Seen in chat three days before the night; its day, consolidated that night, was
    # 1 March: March comes first now, and the chat is the reinforcement.
    chatted = found["mk_chat"]
    assert (chatted.first_observed_at, chatted.last_reinforced_at) == (mar, T0 - timedelta(3))
    assert chatted.evidence["daily_file"] == "2026-03-01.md"
    assert chatted.observed_by == "rhythm:consolidation"
    [boost] = parts["mk_chat"]
    assert (boost.reinforced_at, boost.reinforced_by, boost.evidence["note"]) == (
        T0 - timedelta(3),
        "ada",
        "chat",
    )
    plain = found["mk_plain"]
    assert plain.first_observed_at == plain.last_reinforced_at == T0 - timedelta(3)


def test_a_0006_database_gains_a_text_index_that_finds_its_marks(db_url: str) -> None:
    """0008 queues every mark that has text; indexing the queue makes them all findable by
    their words and their subject's, and a forgotten one stays out. Downgrading removes
    every table and trigger it made."""
    from daemon.services.mark_search import MarkSearch

    upgrade(db_url, "0006")
    engine = create_engine(db_url)
    with engine.begin() as connection:
        for mark_id, subject, observation, state in [
            ("mk_1", "people.arnold.plans", "moving to Lisbon", "active"),
            ("mk_2", "user.food", "figs for breakfast", "withered"),
            ("mk_3", "user.health", "", "forgotten"),
        ]:
            connection.execute(
                text(
                    "INSERT INTO memory_marks (id, workspace_id, subject, observation,"
                    " fingerprint, evidence, initial_strength, half_life_days, observed_by,"
                    " first_observed_at, last_reinforced_at, reinforcement_count, affinity,"
                    " substrate_refs, state, provenance, created_at, updated_at) VALUES (:id,"
                    " 'default', :subject, :observation, 'f', '{}', 0.8, 7.0,"
                    " 'ada', :t, :t, 0, '[]', '[]', :state, 'observed', :t, :t)"
                ),
                {
                    "id": mark_id,
                    "subject": subject,
                    "observation": observation,
                    "state": state,
                    "t": T0.replace(tzinfo=None),
                },
            )
    engine.dispose()

    upgrade(db_url)

    store = Store(db_url)
    store.start()
    try:
        assert store.read_sync(lambda tx: tx.text_index.count_pending()) == 2
        assert MarkSearch().index(store) == 2
        marks = MarkSearch()

        def search(about: str) -> list[str]:
            return store.read_sync(lambda tx: marks.search(tx, "default", about))

        assert search("arnold") == ["mk_1"]
        assert search("figs") == ["mk_2"]
        assert store.read_sync(lambda tx: tx.text_index.count_unindexed_marks()) == 0
    finally:
        store.close()
    upgrade(db_url, "0006")  # down again: the index's tables and triggers go
    engine = create_engine(db_url)
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM memory_marks"))  # no trigger left to fire
    engine.dispose()


def test_a_0008_database_gains_stored_vectors_that_the_worker_fills(
    db_url: str, tmp_path: Path
) -> None:
    """0010 adds the vectors' tables, empty, to a store that holds marks and their text
    rows; the embedding worker then embeds every mark, and a downgrade removes the tables."""
    pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")
    from test_fusion import stored_parts

    from daemon.files.daily import DailyLog
    from daemon.services.mark_search import MarkSearch

    upgrade(db_url, "0008")
    engine = create_engine(db_url)
    with engine.begin() as connection:
        for mark_id, observation in [("mk_1", "moving to Lisbon"), ("mk_2", "figs for tea")]:
            connection.execute(
                text(
                    "INSERT INTO memory_marks (id, workspace_id, subject, observation,"
                    " fingerprint, evidence, initial_strength, half_life_days, observed_by,"
                    " first_observed_at, last_reinforced_at, reinforcement_count, affinity,"
                    " substrate_refs, state, provenance, created_at, updated_at) VALUES (:id,"
                    " 'default', 'user.plans', :observation, 'f', '{}', 0.8, 7.0,"
                    " 'ada', :t, :t, 0, '[]', '[]', 'active', 'observed', :t, :t)"
                ),
                {"id": mark_id, "observation": observation, "t": T0.replace(tzinfo=None)},
            )
    engine.dispose()
    store = Store(db_url)
    store.start()
    try:
        assert MarkSearch().index(store) == 2  # the text rows 0008 made
    finally:
        store.close()

    upgrade(db_url)

    store = Store(db_url)
    store.start()
    try:
        assert store.read_sync(lambda tx: tx.dense.model_and_generation()) == ("", 0)
        assert store.read_sync(lambda tx: (tx.dense.count(), tx.dense.documents())) == (0, 2)
        parts = stored_parts(store, tmp_path)
        worker = parts.attach(DailyLog(tmp_path / "daily"), parts.mark_search())
        worker.run_once()
        assert store.read_sync(lambda tx: tx.dense.count()) == 2
        assert store.read_sync(lambda tx: tx.dense.model_and_generation())[0] == "meaning-test"
    finally:
        store.close()
    from alembic import command

    command.downgrade(alembic_config(db_url), "0008")  # the tables go, the marks stay
    engine = create_engine(db_url)
    with engine.begin() as connection:
        assert connection.execute(text("SELECT count(*) FROM memory_marks")).scalar_one() == 2
        with pytest.raises(Exception, match="dense_vectors"):
            connection.execute(text("SELECT count(*) FROM dense_vectors"))
    engine.dispose()


def test_a_0011_database_keeps_its_text_rows_and_gains_the_substrate_and_compost_layers(
    db_url: str, tmp_path: Path
) -> None:
    """0012 adds the substrate's and the compost's layers beside the daily lines and the
    marks: what an 0011 store answered it still answers, the new layers take rows and are
    found, and a downgrade takes them away again, leaving the old layers as they were."""
    from daemon.core.text_rows import COMPOST, DAILY, SUBSTRATE, Group
    from daemon.search.index import row_of

    def found(store: Store, layer: str, wanted: list[str]) -> list[tuple[str, int]]:
        return store.read_sync(
            lambda tx: [(c.source, c.part) for c in tx.text_index.candidates(layer, wanted, 10)]
        )

    def statistics(store: Store, layer: str, wanted: list[str]) -> tuple[int, int, dict[str, int]]:
        stats = store.read_sync(lambda tx: tx.text_index.statistics(layer, wanted))
        return stats.documents, stats.total_length, stats.frequencies

    upgrade(db_url, "0011")
    store = Store(db_url)
    store.start()
    try:
        lines = ["walked the dog by the lake", "the lake was cold", "fed the dog"]
        rows = [row_of(n, line) for n, line in enumerate(lines, start=1)]
        daily = Group(DAILY, "2026-04-11", "live")
        store.write_sync(lambda tx: tx.text_index.write(daily, rows, [], None))
        before = (found(store, DAILY, ["dog", "lake"]), statistics(store, DAILY, ["dog"]))
    finally:
        store.close()

    upgrade(db_url, "0012")

    assert current_revision(db_url) == "0012"
    store = Store(db_url)
    store.start()
    try:
        assert (found(store, DAILY, ["dog", "lake"]), statistics(store, DAILY, ["dog"])) == before
        notes = Group(SUBSTRATE, str(tmp_path / "pets.md"))
        lessons = Group(COMPOST, str(tmp_path / "retired.json"))
        learnings = [row_of(0, "Feed the cat"), row_of(1, "Walk the dog early")]
        store.write_sync(
            lambda tx: tx.text_index.write(notes, [row_of(0, "# Pets\nThe dog sleeps.")], [], None)
        )
        store.write_sync(lambda tx: tx.text_index.write(lessons, learnings, [], None))
        assert found(store, SUBSTRATE, ["dog"]) == [(notes.source, 0)]
        assert found(store, COMPOST, ["dog"]) == [(lessons.source, 1)]
        assert statistics(store, COMPOST, ["dog", "cat"]) == (2, 5, {"dog": 1, "cat": 1})
        assert (found(store, DAILY, ["dog", "lake"]), statistics(store, DAILY, ["dog"])) == before
    finally:
        store.close()

    from alembic import command

    command.downgrade(alembic_config(db_url), "0011")  # the new layers' rows and tables go

    store = Store(db_url)
    store.start()
    try:
        assert (found(store, DAILY, ["dog", "lake"]), statistics(store, DAILY, ["dog"])) == before
        coverage = store.read_sync(lambda tx: tx.text_index.coverage())
        assert coverage == {DAILY: 3}
    finally:
        store.close()


def test_the_head_read_commands_compare_with_is_alembics() -> None:
    """Read commands check the store's revision against ``HEAD`` without importing Alembic:
    a new migration must move it (else they would call a migrated store unmigrated)."""
    assert head_revision() == alembic_head()


def test_a_0012_database_counts_its_text_rows_in_the_totals_the_worker_reads(
    db_url: str, tmp_path: Path
) -> None:
    """0013 keeps a count of each layer's rows in ``text_totals``, so the embedding worker
    no longer counts the rows themselves (47-57 ms at three years of notes) for its
    progress: the count starts from the rows an 0012 store holds (a line without a term
    among them: it is embedded too), the triggers keep it as rows come and go, and a
    downgrade leaves the other totals as they were."""
    from alembic import command

    from daemon.core.text_rows import DAILY, MARKS, SUBSTRATE, Group
    from daemon.search.index import row_of

    def write(store: Store, group: Group, lines: list[str], removed: list[int]) -> None:
        rows = [row_of(n, line) for n, line in enumerate(lines, start=1)]
        store.write_sync(lambda tx: tx.text_index.write(group, rows, removed, None))

    def counted(store: Store) -> dict[str, int]:
        found = store.read_sync(
            lambda tx: tx.connection.exec_driver_sql(
                "SELECT layer, count(*) FROM text_rows GROUP BY layer"
            ).all()
        )
        return {layer: count for layer, count in found}

    def totals(store: Store) -> dict[str, tuple[int, ...]]:
        found = store.read_sync(
            lambda tx: tx.connection.exec_driver_sql("SELECT * FROM text_totals").mappings().all()
        )
        return {row["layer"]: (row["documents"], row["total_length"]) for row in found}

    upgrade(db_url, "0012")
    store = Store(db_url)
    store.start()
    try:
        write(store, Group(DAILY, "2026-04-11", "live"), ["walked the dog", "🎉🎉", "fed it"], [])
        write(store, Group(DAILY, "2026-04-12", "archived"), ["the lake was cold"], [])
        write(store, Group(MARKS, "mk_a", scope="default"), ["practising violin"], [])
        write(store, Group(SUBSTRATE, str(tmp_path / "pets.md")), ["# Pets"], [])
        before = totals(store)
    finally:
        store.close()

    upgrade(db_url)

    assert current_revision(db_url) == head_revision() == "0013"
    store = Store(db_url)
    store.start()
    try:
        assert counted(store) == {DAILY: 4, MARKS: 1, SUBSTRATE: 1}
        assert store.read_sync(lambda tx: tx.dense.documents()) == 5  # the daily lines, marks
        assert totals(store) == before
        write(store, Group(DAILY, "2026-04-12", "archived"), [], [1])
        write(store, Group(DAILY, "2026-04-13", "live"), ["a", "b", "c"], [])
        write(store, Group(MARKS, "mk_b", scope="default"), ["lentil soup"], [])
        assert counted(store) == {DAILY: 6, MARKS: 2, SUBSTRATE: 1}
        assert store.read_sync(lambda tx: tx.dense.documents()) == 8
        row_counts = store.read_sync(
            lambda tx: dict(
                tx.connection.exec_driver_sql("SELECT layer, row_count FROM text_totals").all()
            )
        )
        assert row_counts == {DAILY: 6, MARKS: 2, SUBSTRATE: 1, "compost": 0}
    finally:
        store.close()

    command.downgrade(alembic_config(db_url), "0012")

    store = Store(db_url)
    store.start()
    try:
        write(store, Group(DAILY, "2026-04-13", "live"), [], [1, 2, 3])
        write(store, Group(MARKS, "mk_b", scope="default"), [], [1])
        write(store, Group(DAILY, "2026-04-12", "archived"), ["the lake was cold"], [])
        assert totals(store) == before
    finally:
        store.close()
