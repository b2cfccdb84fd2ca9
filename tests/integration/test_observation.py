"""memory.observation → marks, reinforcement, and refusal of bad payloads."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select
from support import FAST_RETRY, T0, emit_and_settle, last_error, make_signal

from daemon.bus import SignalBus
from daemon.core.records import Mark
from daemon.store import Store
from daemon.store.tables import MarkTable, ReinforcementTable
from receptors.observation import ObservationReceptor

GOOD: dict[str, Any] = {
    "subject": "User.Food.Vegetables",
    "observation": "Arnold said 180C for 20 min",
    "evidence": {"daily_file": "2026-04-11.md", "line_range": [2, 2]},
    "affinity": ["food"],
    "substrate_refs": ["long-term/lessons.md"],
}


def marks(store: Store) -> list[Mark]:
    return store.read_sync(lambda tx: tx.marks.find("default", "", ("active", "withered")))


def count(store: Store, table: Any) -> int:
    return int(
        store.read_sync(
            lambda tx: tx.connection.execute(select(func.count()).select_from(table)).scalar()
        )
    )


@pytest.mark.asyncio
async def test_observation_makes_a_mark(store: Store) -> None:
    async with SignalBus(store, [ObservationReceptor()]) as bus:
        signal = make_signal("memory.observation", GOOD)
        assert await emit_and_settle(bus, signal) == {"observation": "delivered"}
    [mark] = marks(store)
    assert mark.subject == "user.food.vegetables"
    assert mark.observation == "Arnold said 180C for 20 min"
    assert mark.initial_strength == 0.8
    assert mark.half_life_days == pytest.approx(7.0)
    assert mark.observed_by == "agent-observer"
    assert mark.first_observed_at == T0
    assert mark.evidence == {
        "daily_file": "2026-04-11.md",
        "line_range": [2, 2],
        "signal_ids": [signal.id],
    }
    assert mark.substrate_refs == ["long-term/lessons.md"]
    assert mark.affinity == ["food"]


@pytest.mark.asyncio
async def test_same_observation_three_times_reinforces_one_mark(store: Store) -> None:
    async with SignalBus(store, [ObservationReceptor(reinforce_delta=0.2)]) as bus:
        for day in range(3):
            await emit_and_settle(
                bus, make_signal("memory.observation", GOOD, emitted_at=T0 + timedelta(days=day))
            )
    [mark] = marks(store)
    assert mark.reinforcement_count == 2
    assert mark.last_reinforced_at == T0 + timedelta(days=2)
    boosts = store.read_sync(lambda tx: tx.marks.reinforcements_of([mark.id]))[mark.id]
    assert [(r.reinforced_at, r.strength_delta) for r in boosts] == [
        (T0 + timedelta(days=1), 0.2),
        (T0 + timedelta(days=2), 0.2),
    ]
    # Two weeks on, each part has decayed from its own day (half-life 7 days): the strength
    # recall ranks by is the initial 0.8 and both boosts, not 0.8 alone (0.2).
    now = T0 + timedelta(days=14)
    [scored] = store.read_sync(lambda tx: tx.marks.score("default", "user.food", ("active",), now))
    assert scored.value == pytest.approx(0.8 * 2**-2 + 0.2 * 2 ** (-13 / 7) + 0.2 * 2 ** (-12 / 7))


@pytest.mark.asyncio
async def test_a_withered_mark_observed_again_is_active(store: Store) -> None:
    async with SignalBus(store, [ObservationReceptor()]) as bus:
        await emit_and_settle(bus, make_signal("memory.observation", GOOD))
        [mark] = marks(store)
        store.write_sync(lambda tx: tx.marks.set_state([mark.id], "withered", T0))
        await emit_and_settle(
            bus, make_signal("memory.observation", GOOD, emitted_at=T0 + timedelta(days=30))
        )
    [revived] = marks(store)
    assert revived.id == mark.id
    assert revived.state == "active"
    assert revived.reinforcement_count == 1


@pytest.mark.asyncio
async def test_redelivery_applies_nothing_twice(store: Store) -> None:
    receptor = ObservationReceptor()
    signal = make_signal("memory.observation", GOOD)
    for _ in range(2):  # the same signal applied twice, as a crash before the done-mark would
        store.write_sync(lambda tx: receptor.apply(tx, signal))
    assert count(store, MarkTable) == 1


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({k: v for k, v in GOOD.items() if k != "subject"}, "subject"),
        (GOOD | {"subject": "  "}, "subject"),
        (GOOD | {"subject": "..."}, "subject"),
        (GOOD | {"observation": ""}, "observation"),
        ({k: v for k, v in GOOD.items() if k != "evidence"}, "evidence"),
        (GOOD | {"evidence": {}}, "evidence"),
        (GOOD | {"evidence": {"signal_ids": [], "note": None}}, "evidence"),
        (GOOD | {"evidence": {"daily_file": "../../etc/passwd"}}, "evidence.daily_file"),
        (GOOD | {"evidence": {"daily_file": "2026-02-30.md"}}, "evidence.daily_file"),
        (GOOD | {"evidence": {"line_range": [3, 1]}}, "evidence.line_range"),
        (GOOD | {"substrate_refs": ["../secrets.md"]}, "substrate_refs.0"),
        (GOOD | {"affinity": "food"}, "affinity"),
        (GOOD | {"surprise": 1}, "surprise"),
        (GOOD | {"observed_at": "2026-04-11T10:00:00"}, "observed_at"),  # no time zone
        (GOOD | {"observed_at": "2999-01-01T00:00:00Z"}, "observed_at"),  # the future
        (GOOD | {"observed_at": "1850-01-01T00:00:00Z"}, "observed_at"),
        (GOOD | {"observed_at": 1744365600}, "observed_at"),  # a number, not an instant
        (GOOD | {"observed_at": "yesterday"}, "observed_at"),
    ],
)
@pytest.mark.asyncio
async def test_contract_violations_are_dead_and_write_nothing(
    store: Store, payload: dict[str, Any], field: str
) -> None:
    async with SignalBus(store, [ObservationReceptor()], retry=FAST_RETRY) as bus:
        signal = make_signal("memory.observation", payload)
        assert await emit_and_settle(bus, signal) == {"observation": "dead"}
    error = last_error(store, signal.id)
    assert error is not None and error.startswith(f"payload.{field}:")
    assert count(store, MarkTable) == 0
    assert count(store, ReinforcementTable) == 0
