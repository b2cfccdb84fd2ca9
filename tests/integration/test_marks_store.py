"""Marks, reinforcements and seeds on the real store (SQLite, and PostgreSQL when configured)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import event

from daemon.core.records import Mark, Reinforcement, Seed
from daemon.store import Store, Tx
from daemon.store.marks import marks as marks_table
from daemon.store.sql import IN_LIST_LIMIT
from daemon.testing import subject_matches
from receptors.consolidation import wither_sweep

T0 = datetime(2026, 4, 11, tzinfo=UTC)


def make_mark(mark_id: str, subject: str, **overrides: Any) -> Mark:
    values: dict[str, Any] = {
        "id": mark_id,
        "workspace_id": "w",
        "subject": subject,
        "observation": f"about {subject}",
        "evidence": {"note": "test"},
        "initial_strength": 1.0,
        "half_life_days": 7.0,
        "observed_by": "tester",
        "first_observed_at": T0,
        "last_reinforced_at": T0,
        "reinforcement_count": 0,
        "affinity": [],
        "substrate_refs": [],
        "state": "active",
        "created_at": T0,
        "updated_at": T0,
    }
    return Mark(**(values | overrides))


def insert(store: Store, *marks: Mark) -> None:
    store.write_sync(lambda tx: tx.marks.insert(marks))


def ids(store: Store, prefix: str, **kwargs: Any) -> list[str]:
    found = store.read_sync(lambda tx: tx.marks.find("w", prefix, **kwargs))
    return sorted(m.id for m in found)


def test_insert_find_and_idempotent_insert(store: Store) -> None:
    insert(store, make_mark("m1", "user.sleep.bedtime"))
    insert(store, make_mark("m1", "other"))  # the same id again: ignored
    found = store.read_sync(lambda tx: tx.marks.get("m1"))
    assert found is not None and found.subject == "user.sleep.bedtime"
    assert found.first_observed_at == T0


def test_prefix_is_segment_bounded_and_escapes_wildcards(store: Store) -> None:
    insert(
        store,
        make_mark("a", "user.sleep.bedtime"),
        make_mark("b", "user.sleep.wake"),
        make_mark("c", "user.food.breakfast"),
        make_mark("d", "user.sleepover"),
        make_mark("e", "arnold.sleep"),
        make_mark("f", "axb.c"),
        make_mark("g", "a%.x"),
        make_mark("h", "ab"),
        make_mark("i", "user.sleep"),
    )
    assert ids(store, "user.sleep") == ["a", "b", "i"]
    assert ids(store, "a_b") == []
    assert ids(store, "a%") == ["g"]
    assert len(ids(store, "")) == 9
    assert ids(store, "USER.Sleep.") == ["a", "b", "i"]


def test_prefix_query_uses_the_index_on_sqlite(store: Store) -> None:
    if store.dialect != "sqlite":
        pytest.skip("EXPLAIN QUERY PLAN is SQLite's")
    plans: list[str] = []

    def explain(tx: Tx) -> None:
        @event.listens_for(tx.connection, "before_cursor_execute", retval=True)
        def _plan(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> Any:
            if statement.startswith("SELECT"):
                cursor.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)
                plans.append(" ".join(str(row[-1]) for row in cursor.fetchall()))
            return statement, parameters

        tx.marks.find("w", "user.sleep")

    store.read_sync(explain)
    assert plans and "ix_memory_marks_workspace_subject" in plans[0] and "subject>" in plans[0]


def test_states_filter(store: Store) -> None:
    insert(store, make_mark("a", "user.x"), make_mark("b", "user.y", state="withered"))
    assert ids(store, "user") == ["a"]
    assert ids(store, "user", states=("active", "withered")) == ["a", "b"]


def test_reinforce_counts_revives_and_is_idempotent(store: Store) -> None:
    insert(store, make_mark("m", "user.x", state="withered"))
    mark = store.read_sync(lambda tx: tx.marks.get("m"))
    assert mark is not None
    rf = Reinforcement(
        id="rf1",
        mark_id="m",
        reinforced_at=T0 + timedelta(days=1),
        reinforced_by="tester",
        evidence={"note": "again"},
        strength_delta=0.2,
    )
    store.write_sync(lambda tx: tx.marks.reinforce([(mark, rf)]))
    store.write_sync(lambda tx: tx.marks.reinforce([(mark, rf)]))  # same id: ignored
    after = store.read_sync(lambda tx: tx.marks.get("m"))
    assert after is not None
    assert after.reinforcement_count == 1
    assert after.last_reinforced_at == T0 + timedelta(days=1)
    assert after.state == "active"
    found = store.read_sync(lambda tx: tx.marks.reinforcements_of(["m"]))
    assert [r.strength_delta for r in found["m"]] == [0.2]


def test_wither_sweep(store: Store) -> None:
    insert(store, make_mark("fresh", "a.b"), make_mark("old", "a.c", initial_strength=0.3))
    swept_at = T0 + timedelta(days=21)
    withered = store.write_sync(lambda tx: wither_sweep(tx, "w", swept_at))
    assert withered == ["old"]
    assert ids(store, "a", states=("withered",)) == ["old"]
    old, fresh = store.read_sync(lambda tx: tx.marks.get_many(["old", "fresh"]))
    assert (old.updated_at, fresh.updated_at) == (swept_at, T0)
    assert store.write_sync(lambda tx: tx.marks.set_state([], "withered", swept_at)) == 0


def seed(seed_id: str, minutes: int, workspace: str = "w") -> Seed:
    at = T0 + timedelta(minutes=minutes)
    return Seed(
        id=seed_id,
        workspace_id=workspace,
        subject="user.food",
        proposed_change="add a line",
        target_file="long-term/lessons.md",
        based_on_marks=["m1"],
        planted_at=at,
        planted_by="agent",
        state="pending",
        created_at=at,
        updated_at=at,
    )


def plant_seeds(store: Store, *seeds: Seed) -> None:
    store.write_sync(lambda tx: [tx.seeds.insert(s) for s in seeds])


def test_seeds_by_state_and_review_only_when_pending(store: Store) -> None:
    plant_seeds(store, seed("s1", 0), seed("s2", 1))
    reviewed_at = T0 + timedelta(days=4)
    assert store.write_sync(lambda tx: tx.seeds.review("s1", "accepted", "joshua", reviewed_at))
    assert not store.write_sync(lambda tx: tx.seeds.review("s1", "rejected", "joshua", reviewed_at))
    pending = store.read_sync(lambda tx: tx.seeds.listing("w", "pending"))
    assert [s.id for s in pending] == ["s2"]
    all_seeds = store.read_sync(lambda tx: tx.seeds.listing("w"))
    assert [s.id for s in all_seeds] == ["s2", "s1"]
    accepted = store.read_sync(lambda tx: tx.seeds.get("s1", "w"))
    assert store.read_sync(lambda tx: tx.seeds.get("s1", "elsewhere")) is None
    assert accepted is not None
    assert (accepted.state, accepted.reviewed_by, accepted.reviewed_at, accepted.updated_at) == (
        "accepted",
        "joshua",
        reviewed_at,
        reviewed_at,
    )

    undone_at = reviewed_at + timedelta(hours=1)
    assert store.write_sync(lambda tx: tx.seeds.undo_review("s1", undone_at))
    assert not store.write_sync(lambda tx: tx.seeds.undo_review("s1", undone_at))  # pending
    undone = store.read_sync(lambda tx: tx.seeds.get("s1", "w"))
    assert undone is not None
    assert (undone.state, undone.reviewed_by, undone.reviewed_at, undone.updated_at) == (
        "pending",
        None,
        None,
        undone_at,
    )


def test_seeds_wither_in_their_own_workspace_only(store: Store) -> None:
    plant_seeds(
        store, seed("old", 0), seed("young", 60), seed("old-elsewhere", 0, workspace="other")
    )
    at = T0 + timedelta(days=30)
    cutoff = T0 + timedelta(minutes=30)
    assert store.write_sync(lambda tx: tx.seeds.wither("w", cutoff, at)) == 1
    withered = store.read_sync(lambda tx: tx.seeds.get("old", "w"))
    assert withered is not None
    assert (withered.state, withered.withered_at, withered.updated_at) == ("withered", at, at)
    assert store.read_sync(lambda tx: tx.seeds.get("young", "w")).state == "pending"  # type: ignore[union-attr]
    elsewhere = store.read_sync(lambda tx: tx.seeds.get("old-elsewhere", "other"))
    assert elsewhere is not None and elsewhere.state == "pending"
    week = (at - timedelta(days=7), at)
    assert store.read_sync(lambda tx: tx.seeds.withered_between("w", *week)) == 1
    assert store.read_sync(lambda tx: tx.seeds.withered_between("other", *week)) == 0
    after = (at, at + timedelta(days=7))
    assert store.read_sync(lambda tx: tx.seeds.withered_between("w", *after)) == 0
    before = (at - timedelta(days=7), at - timedelta(seconds=1))
    assert store.read_sync(lambda tx: tx.seeds.withered_between("w", *before)) == 0


def test_a_rejection_can_be_undone_like_an_acceptance(store: Store) -> None:
    plant_seeds(store, seed("s1", 0))
    reviewed_at = T0 + timedelta(days=1)
    assert store.write_sync(lambda tx: tx.seeds.review("s1", "rejected", "ada", reviewed_at))
    assert store.write_sync(lambda tx: tx.seeds.undo_review("s1", reviewed_at))
    undone = store.read_sync(lambda tx: tx.seeds.get("s1", "w"))
    assert undone is not None and (undone.state, undone.reviewed_by) == ("pending", None)


def test_the_oldest_pending_seeds_come_in_planting_order_with_their_count(store: Store) -> None:
    # Ids that sort against the planting order, a reviewed seed and another workspace's.
    plant_seeds(
        store,
        seed("z-first", 0),
        seed("m-second", 1),
        seed("a-third", 2),
        seed("b-reviewed", -5),
        seed("c-elsewhere", -10, workspace="other"),
    )
    store.write_sync(lambda tx: tx.seeds.review("b-reviewed", "accepted", "ada", T0))
    count, oldest = store.read_sync(lambda tx: tx.seeds.oldest_pending("w", 2))
    assert (count, [s.id for s in oldest]) == (3, ["z-first", "m-second"])


SEGMENTS = ["user", "sleep", "a_b", "a%", "axb", "sleepover", "x.y", "%", "_"]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    subjects=st.lists(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3), max_size=12),
    prefix=st.lists(st.sampled_from(SEGMENTS), max_size=2),
)
def test_the_sql_prefix_query_agrees_with_the_matching_rule(
    store: Store, subjects: list[list[str]], prefix: list[str]
) -> None:
    """The rule is defined once in Python (subject_matches); the indexed SQL must agree."""
    store.write_sync(lambda tx: tx.connection.execute(marks_table.delete()))
    names = {".".join(parts) for parts in subjects}
    insert(store, *(make_mark(f"m{n}", name) for n, name in enumerate(sorted(names))))
    wanted = ".".join(prefix)
    found = {m.subject for m in store.read_sync(lambda tx: tx.marks.find("w", wanted))}
    assert found == {name for name in names if subject_matches(wanted, name)}


def test_lookups_by_id_cross_the_in_list_limit(store: Store) -> None:
    # One more than two full IN lists: the first, the last and a chunk boundary all count.
    many = [make_mark(f"m{n:04}", f"topic.{n}") for n in range(2 * IN_LIST_LIMIT + 1)]
    insert(store, *many)
    wanted = [m.id for m in many]
    texts = store.read_sync(lambda tx: tx.marks.texts_of(wanted))
    assert sorted(t.id for t in texts) == wanted
    scored = store.read_sync(lambda tx: tx.marks.score_among(wanted, "w", ["active"], T0))
    assert sorted(s.mark_id for s in scored) == wanted
    assert {s.value for s in scored} == {1.0}


def test_scoring_among_ids_keeps_only_what_the_filters_allow(store: Store) -> None:
    later = T0 + timedelta(days=1)
    insert(
        store,
        make_mark("kept", "a"),
        make_mark("elsewhere", "a", workspace_id="other"),
        make_mark("withered", "a", state="withered"),
        make_mark("stale", "a", last_reinforced_at=T0 - timedelta(days=3)),
        make_mark("inferred", "a", provenance="inferred"),
    )
    every = ["kept", "elsewhere", "withered", "stale", "inferred", "unknown"]

    def scored(**filters: Any) -> list[str]:
        found = store.read_sync(
            lambda tx: tx.marks.score_among(
                every, "w", filters.pop("states", ["active"]), later, **filters
            )
        )
        return sorted(s.mark_id for s in found)

    assert scored() == ["inferred", "kept", "stale"]
    assert scored(states=["active", "withered"]) == ["inferred", "kept", "stale", "withered"]
    assert scored(reinforced_since=T0) == ["inferred", "kept"]
    assert scored(provenances=["observed"]) == ["kept", "stale"]
    [kept] = store.read_sync(lambda tx: tx.marks.score_among(["kept"], "w", ["active"], later))
    assert kept.value == pytest.approx(2 ** (-1 / 7))


def test_ending_and_forgetting_stamp_the_mark_and_wipe_its_evidence(store: Store) -> None:
    ended, forgotten = T0 + timedelta(days=1), T0 + timedelta(days=2)
    insert(store, make_mark("m1", "user.x"), make_mark("m2", "user.y"))
    m2 = store.read_sync(lambda tx: tx.marks.get("m2"))
    assert m2 is not None
    again = Reinforcement(
        id="rf1",
        mark_id="m2",
        reinforced_at=T0,
        reinforced_by="tester",
        evidence={"note": "again"},
        strength_delta=0.2,
    )
    store.write_sync(lambda tx: tx.marks.reinforce([(m2, again)]))

    assert store.write_sync(lambda tx: tx.marks.end("m1", "retracted", "wrong", ended))
    assert not store.write_sync(lambda tx: tx.marks.end("m1", "retracted", "twice", ended))
    m1 = store.read_sync(lambda tx: tx.marks.get("m1"))
    assert m1 is not None
    assert (m1.state, m1.ended_at, m1.ended_reason, m1.updated_at, m1.observation) == (
        "retracted",
        ended,
        "wrong",
        ended,
        "about user.x",
    )

    store.write_sync(lambda tx: tx.marks.erase(["m1", "m2"], "asked to", forgotten))
    after = {m.id: m for m in store.read_sync(lambda tx: tx.marks.get_many(["m1", "m2"]))}
    assert [(m.state, m.observation, m.evidence, m.ended_reason) for m in after.values()] == [
        ("forgotten", "", {}, "asked to")
    ] * 2
    rows = store.read_sync(lambda tx: list(tx.marks.all_rows()))
    assert {row["fingerprint"] for row in rows} == {""}, "a hash of the text is text too"
    assert after["m1"].ended_at == ended, "it ended first: that date stands"
    assert after["m2"].ended_at == forgotten
    assert {m.updated_at for m in after.values()} == {forgotten}  # what Loom sorts changes by
    [kept] = store.read_sync(lambda tx: tx.marks.reinforcements_of(["m2"]))["m2"]
    assert (kept.id, kept.evidence, kept.strength_delta) == ("rf1", {}, 0.2)


def test_an_import_counts_only_the_marks_it_added(store: Store) -> None:
    insert(store, make_mark("m1", "user.x"))
    exported = [  # as an export file holds them
        {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}
        for row in store.read_sync(lambda tx: list(tx.marks.all_rows()))
    ]
    assert store.write_sync(lambda tx: tx.marks.restore([], [])) == 0
    assert store.write_sync(lambda tx: tx.marks.restore(exported, [])) == 0
    fresh = [row | {"id": "m9"} for row in exported]
    assert store.write_sync(lambda tx: tx.marks.restore(fresh, [])) == 1


def test_the_subjects_offered_to_the_extractor_are_those_of_live_memory(store: Store) -> None:
    """Consolidation hands these to its extractor (a language model, perhaps hosted): the
    subject of a forgotten, retracted or superseded mark must not leave with them."""
    insert(
        store,
        make_mark("a", "user.a"),
        make_mark("w", "user.w", state="withered"),
        make_mark("p", "user.p", state="promoted"),
        make_mark("r", "user.retracted", state="retracted"),
        make_mark("s", "user.superseded", state="superseded"),
        make_mark("f", "user.health", state="forgotten"),
        make_mark("o", "user.other", workspace_id="other"),
    )
    assert store.read_sync(lambda tx: tx.marks.subjects("w")) == ["user.a", "user.p", "user.w"]


# -- what a browser (Loom) reads ----------------------------------------------------------


def test_the_seeds_based_on_a_mark_are_those_naming_it_exactly(store: Store) -> None:
    plant_seeds(
        store,
        replace(seed("s1", 0), based_on_marks=["m_1", "m2"]),
        replace(seed("s2", 1), based_on_marks=["mx1"]),  # "m_1" as a LIKE pattern matches it
        replace(seed("s3", 2), based_on_marks=['x"m_1"y']),  # so does a quoted substring
        replace(seed("s4", 3, workspace="other"), based_on_marks=["m_1"]),
        replace(seed("s5", 4), based_on_marks=["m_1"]),
    )
    found = store.read_sync(lambda tx: tx.seeds.based_on("w", "m_1"))
    assert [s.id for s in found] == ["s1", "s5"]
    assert store.read_sync(lambda tx: tx.seeds.based_on("w", "m")) == []
    # Planted in the same instant (one consolidation): by id, whatever the insert order.
    plant_seeds(store, *(replace(seed(i, 5), based_on_marks=["m9"]) for i in ("s8", "s6", "s7")))
    assert [s.id for s in store.read_sync(lambda tx: tx.seeds.based_on("w", "m9"))] == [
        "s6",
        "s7",
        "s8",
    ]


def test_the_marks_citing_a_daily_file_cite_it_in_their_own_or_a_reinforcements_evidence(
    store: Store,
) -> None:
    day = "daily/2026-04_11.md"
    insert(
        store,
        make_mark("own", "a.b", evidence={"daily_file": day, "line_range": [1, 2]}),
        make_mark("boosted", "a.c"),
        make_mark("lookalike", "a.d", evidence={"daily_file": "daily/2026-04x11.md"}),
        make_mark("elsewhere", "a.e", evidence={"note": day}),
        make_mark("other", "a.f", workspace_id="v", evidence={"daily_file": day}),
    )
    boosted = store.read_sync(lambda tx: tx.marks.get("boosted"))
    assert boosted is not None
    rf = Reinforcement(
        id="rf",
        mark_id="boosted",
        reinforced_at=T0,
        reinforced_by="tester",
        evidence={"daily_file": day, "line_range": [3, 3]},
        strength_delta=0.1,
    )
    store.write_sync(lambda tx: tx.marks.reinforce([(boosted, rf)]))
    found = store.read_sync(lambda tx: tx.marks.citing("w", day))
    assert sorted(m.id for m in found) == ["boosted", "own"]


def test_a_browser_search_takes_its_text_and_prefix_literally(store: Store) -> None:
    insert(
        store,
        make_mark("pct", "user.food", observation="100% Sure", observed_by="ann"),
        make_mark("plain", "user.foodie", observation="100 sure"),
        make_mark("under", "user_x.y", observation="an X"),
        make_mark("wild", "userAx.y", observation="an X"),
        make_mark("gone", "user.food", observation="100% sure", state="forgotten"),
    )

    def found(**filters: Any) -> list[str]:
        scored = store.read_sync(lambda tx: tx.marks.score_filtered("w", T0, **filters))
        return sorted(s.mark_id for s in scored)

    assert found(text="0% s") == ["gone", "pct"], "case-insensitive, % taken literally"
    assert found(text="USER_X") == ["under"], "_ taken literally, the subject searched too"
    assert found(subject_prefix="user.food") == ["gone", "pct", "plain"], "a plain prefix"
    assert found(subject_prefix="user_") == ["under"]
    assert found(text="sure", states=("active",)) == ["pct", "plain"]
    assert found(observed_by="ann") == ["pct"]
    assert found() == ["gone", "pct", "plain", "under", "wild"]
    [pct] = store.read_sync(lambda tx: tx.marks.score_filtered("w", T0, observed_by="ann"))
    assert pct.value == 1.0


def test_the_observers_of_a_workspace_each_once_in_order(store: Store) -> None:
    insert(
        store,
        make_mark("a", "a.a", observed_by="zed"),
        make_mark("b", "a.b", observed_by="ann"),
        make_mark("c", "a.c", observed_by="zed"),
        make_mark("d", "a.d", observed_by="bob", workspace_id="v"),
    )
    assert store.read_sync(lambda tx: tx.marks.observers("w")) == ["ann", "zed"]
