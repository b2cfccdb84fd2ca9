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
