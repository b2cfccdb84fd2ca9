"""The strength that ranks marks (and decides ``min_strength`` and the wither sweep) is the
strength recall shows, for any reinforcement history; the sweep's threshold holds exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_marks_store import make_mark

from daemon.core.records import Mark, Reinforcement
from daemon.core.strength import WITHER_THRESHOLD, current_strength, strength
from daemon.files.compost import Compost
from daemon.files.daily import DailyLog
from daemon.files.substrate import Substrate
from daemon.schema.recall import RecallQuery
from daemon.services.recall import Memory, recall
from daemon.store import Store
from daemon.store.marks import marks as marks_table
from daemon.store.marks import reinforcements as reinforcements_table
from receptors.consolidation import wither_sweep

NOW = datetime(2026, 11, 30, 3, tzinfo=UTC)
DAY = timedelta(days=1)


def expected(
    initial: float, h: float, first: datetime, boosts: list[tuple[datetime, float]]
) -> float:
    """SPEC §5 written out: each part halves every ``h`` days from its own instant."""

    def faded(amount: float, since: datetime) -> float:
        return amount if h == 0 else amount * 0.5 ** ((NOW - since) / DAY / h)

    return min(1.0, max(0.0, faded(initial, first) + sum(faded(d, at) for at, d in boosts)))


# A history: the initial strength, the half-life, when it was first observed (seconds before
# NOW) and its reinforcements (seconds after that, each before NOW, and their deltas).
histories = st.tuples(
    st.floats(0.0, 1.0),
    st.one_of(st.just(0.0), st.floats(0.5, 90.0)),
    st.integers(0, 400 * 86400),
    st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 0.6)), max_size=6),
)


def unpack(
    history: tuple[float, float, int, list[tuple[float, float]]],
) -> tuple[float, float, datetime, list[tuple[datetime, float]]]:
    initial, h, age_seconds, parts = history
    first = NOW - timedelta(seconds=age_seconds)
    boosts = [
        (first + timedelta(seconds=int(fraction * age_seconds)), delta) for fraction, delta in parts
    ]
    return initial, h, first, sorted(boosts, key=lambda boost: boost[0])


@settings(max_examples=300)
@given(histories)
def test_the_value_and_its_breakdown_agree_with_the_rule(
    history: tuple[float, float, int, list[tuple[float, float]]],
) -> None:
    initial, h, first, boosts = unpack(history)
    value = current_strength(initial, h, first, boosts, NOW)
    assert value == pytest.approx(expected(initial, h, first, boosts), abs=1e-12)
    assert value == pytest.approx(strength(initial, h, first, boosts, NOW).value, abs=1e-12)


def store_history(
    store: Store, mark_id: str, workspace: str, history: tuple[float, float, int, list[Any]]
) -> Mark:
    initial, h, first, boosts = unpack(history)
    mark = make_mark(
        mark_id,
        "user.food",
        workspace_id=workspace,
        initial_strength=initial,
        half_life_days=h,
        first_observed_at=first,
        last_reinforced_at=first,
    )
    store.write_sync(lambda tx: tx.marks.insert([mark]))
    reinforcements = [
        Reinforcement(
            id=f"{mark_id}-rf{n}",
            mark_id=mark_id,
            reinforced_at=at,
            reinforced_by="tester",
            evidence={"note": "again"},
            strength_delta=delta,
        )
        for n, (at, delta) in enumerate(boosts)
    ]
    store.write_sync(lambda tx: tx.marks.reinforce([(mark, r) for r in reinforcements]))
    return mark


def layers(store: Store, root: Path, workspace: str = "w") -> Memory:
    return Memory(
        store=store,
        substrate=Substrate([]),
        daily=DailyLog(root / "daily"),
        compost=Compost(root / "compost"),
        workspace=workspace,
        zone=ZoneInfo("UTC"),
    )


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=histories)
def test_the_ranking_strength_is_the_strength_recall_shows(
    store: Store, tmp_path: Path, history: tuple[float, float, int, list[tuple[float, float]]]
) -> None:
    store.write_sync(lambda tx: tx.connection.execute(reinforcements_table.delete()))
    store.write_sync(lambda tx: tx.connection.execute(marks_table.delete()))
    store_history(store, "m", "w", history)
    initial, h, first, boosts = unpack(history)
    [scored] = store.read_sync(lambda tx: tx.marks.score("w", "", ("active",), NOW))
    assert scored.value == pytest.approx(expected(initial, h, first, boosts), abs=1e-9)
    assert scored.value == pytest.approx(scored.breakdown(NOW).value, abs=1e-12)
    query = RecallQuery(about="user.food", layers=("marks",), min_strength=0.0)
    [shown] = recall(query, layers(store, tmp_path), NOW).to_json()["marks"]
    assert shown["current_strength"] == pytest.approx(scored.value, abs=1e-6)
    # min_strength is decided on that same value: just above it, the mark is left out.
    if scored.value < 1.0:
        above = query.model_copy(update={"min_strength": min(1.0, scored.value + 1e-9)})
        assert recall(above, layers(store, tmp_path), NOW).marks == []


def fading(value_now: float) -> tuple[float, float, int, list[tuple[float, float]]]:
    """A mark first observed 70 days ago (its own strength long gone) and reinforced once, 7
    days ago (one half-life), so that its strength is ``value_now`` at NOW."""
    base = 0.5 * 0.5**10
    delta = 2 * (value_now - base)
    return (0.5, 7.0, 70 * 86400, [(63 / 70, delta)])


@pytest.mark.parametrize(
    ("offset", "withers"), [(+1e-6, False), (-1e-6, True), (+0.01, False), (-0.01, True)]
)
def test_the_wither_sweep_at_its_threshold(store: Store, offset: float, withers: bool) -> None:
    mark = store_history(store, "old", "w", fading(WITHER_THRESHOLD + offset))
    [scored] = store.read_sync(lambda tx: tx.marks.score("w", "", ("active",), NOW))
    assert scored.value == pytest.approx(WITHER_THRESHOLD + offset, abs=1e-9)
    withered = store.write_sync(lambda tx: wither_sweep(tx, "w", NOW))
    assert withered == (["old"] if withers else [])
    found = store.read_sync(lambda tx: tx.marks.get(mark.id))
    assert found is not None and found.state == ("withered" if withers else "active")
