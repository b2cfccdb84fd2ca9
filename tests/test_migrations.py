"""Upgrading a database written by an earlier release keeps everything in it."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import create_engine, text

from daemon.store import Store
from daemon.store.migrate import current_revision, head_revision, upgrade

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

    assert current_revision(db_url) == head_revision() == "0004"
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
