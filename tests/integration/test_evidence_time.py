"""Time is the evidence's: a mark is first observed, reinforced and decays from when its
evidence was seen or written (an observation's ``emitted_at`` or ``observed_at``, a daily
line's day), not from when the daemon processed it; evidence that arrives out of order
gives the same mark as evidence in order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support import FAST_RETRY, T0, emit_and_settle, make_signal

from daemon.bus import SignalBus
from daemon.composition import build_receptors
from daemon.config import parse_config
from daemon.core.records import CURRENT_MARK_STATES, Mark, Reinforcement, in_evidence_order
from daemon.core.strength import strength
from daemon.files.daily import DailyLog
from daemon.store import Store
from receptors.consolidation import evidence_instant
from receptors.observation import ObservationReceptor

BERLIN = ZoneInfo("Europe/Berlin")
COFFEE: dict[str, Any] = {
    "subject": "user.coffee",
    "observation": "Takes coffee black, no sugar",
    "evidence": {"note": "chat"},
}


def daemon(store: Store, daily_dir: Path) -> SignalBus:
    """The daemon's receptors on a bus whose clock says T0, the zone Europe/Berlin."""
    config = parse_config({"timezone": "Europe/Berlin", "paths": {"daily": str(daily_dir)}})
    receptors = build_receptors(config, store, DailyLog(daily_dir))
    return SignalBus(store, receptors, retry=FAST_RETRY, clock=lambda: T0)


def marks(store: Store, workspace: str = "default") -> list[Mark]:
    return store.read_sync(lambda tx: tx.marks.find(workspace, "", CURRENT_MARK_STATES))


async def emit(bus: SignalBus, kind: str, payload: dict[str, Any], **fields: Any) -> None:
    status = await emit_and_settle(bus, make_signal(kind, payload, **fields))
    assert set(status.values()) == {"delivered"}, status


@pytest.mark.asyncio
async def test_a_day_noted_long_ago_is_first_observed_that_day_and_is_weak(
    store: Store, tmp_path: Path
) -> None:
    """``memory note … --date 2026-01-15`` then ``consolidate``, in April: the mark is
    three months old, not new, and, never reinforced, weak enough to wither."""
    note = {"text": "OBS subject=user.food.breakfast porridge with figs", "date": "2026-01-15"}
    async with daemon(store, tmp_path) as bus:
        await emit(bus, "memory.daily_note", note)
        await emit(bus, "memory.consolidate", {"date": "2026-01-15"})
    [mark] = marks(store)
    noon = datetime(2026, 1, 15, 11, tzinfo=UTC)  # 12:00 in Berlin (CET)
    assert (mark.first_observed_at, mark.last_reinforced_at) == (noon, noon)
    assert mark.created_at == T0, "made when it was consolidated"
    now = strength(mark.initial_strength, mark.half_life_days, noon, [], T0)
    assert now.age_days == pytest.approx((T0 - noon) / timedelta(days=1))
    assert now.value == pytest.approx(0.7 * 2 ** (-now.age_days / 14)) and now.value < 0.1
    assert mark.state == "withered", "the sweep after the consolidation saw it faded"


def test_a_day_not_over_yet_is_dated_no_later_than_its_consolidation() -> None:
    day = T0.astimezone(BERLIN).date()  # T0 is noon in Berlin (CEST)
    evening, morning = T0 + timedelta(hours=8), T0 - timedelta(hours=3)
    assert evidence_instant(day, BERLIN, evening) == T0
    assert evidence_instant(day, BERLIN, morning) == morning


@pytest.mark.asyncio
async def test_observed_at_dates_the_mark_and_its_reinforcements(
    store: Store, tmp_path: Path
) -> None:
    async with daemon(store, tmp_path) as bus:
        await emit(bus, "memory.observation", COFFEE | {"observed_at": "2026-03-12T09:30+01:00"})
        await emit(bus, "memory.observation", COFFEE | {"observed_at": "2026-03-20T08:30:00Z"})
    [mark] = marks(store)
    assert mark.first_observed_at == datetime(2026, 3, 12, 8, 30, tzinfo=UTC)
    assert mark.last_reinforced_at == datetime(2026, 3, 20, 8, 30, tzinfo=UTC)


async def observe_in(bus: SignalBus, workspace: str, order: list[int]) -> None:
    """The same fact, seen on T0 - 10 days, T0 - 5 days and T0, observed in ``order``."""
    for days in order:
        payload = COFFEE | {
            "evidence": {"note": f"seen {days} days before T0"},
            "observed_at": (T0 - timedelta(days=days)).isoformat(),
        }
        await emit(bus, "memory.observation", payload, workspace_id=workspace)


@pytest.mark.asyncio
async def test_evidence_out_of_order_makes_the_same_mark_as_in_order(
    store: Store, tmp_path: Path
) -> None:
    async with daemon(store, tmp_path) as bus:
        await observe_in(bus, "in-order", [10, 5, 0])
        await observe_in(bus, "reversed", [0, 5, 10])
        await observe_in(bus, "shuffled", [5, 0, 10])
    now = T0 + timedelta(days=3)

    def seen(workspace: str) -> tuple[Any, ...]:
        [mark] = marks(store, workspace)
        parts = store.read_sync(lambda tx: tx.marks.reinforcements_of([mark.id]))[mark.id]
        [scored] = store.read_sync(lambda tx: tx.marks.score(workspace, "", ("active",), now))
        return (
            mark.first_observed_at,
            mark.last_reinforced_at,
            mark.evidence["note"],
            sorted((r.reinforced_at, r.evidence["note"]) for r in parts),
            round(scored.value, 12),
        )

    expected = seen("in-order")
    assert expected[:3] == (T0 - timedelta(days=10), T0, "seen 10 days before T0")
    assert seen("reversed") == expected
    assert seen("shuffled") == expected


@pytest.mark.asyncio
async def test_an_old_day_consolidated_later_moves_a_marks_first_observation_back(
    store: Store, tmp_path: Path
) -> None:
    note = {"text": "OBS subject=user.coffee takes coffee black, no sugar", "date": "2026-01-15"}
    async with daemon(store, tmp_path) as bus:
        await emit(bus, "memory.observation", COFFEE)  # today, in chat
        await emit(bus, "memory.daily_note", note)
        await emit(bus, "memory.consolidate", {"date": "2026-01-15"})
    [mark] = marks(store)
    assert mark.first_observed_at == datetime(2026, 1, 15, 11, tzinfo=UTC)
    assert mark.last_reinforced_at == T0
    assert mark.evidence["daily_file"] == "2026-01-15.md"
    [boost] = store.read_sync(lambda tx: tx.marks.reinforcements_of([mark.id]))[mark.id]
    assert (boost.reinforced_at, boost.evidence["note"]) == (T0, "chat")
    assert mark.state == "active", "reinforced today: still strong"


def test_reinforcements_older_than_their_mark_trade_places_with_it_one_after_another() -> None:
    signal = make_signal("memory.observation", COFFEE)
    days = [T0 - timedelta(days=n) for n in range(6)]
    mark = Mark.observed(
        signal,
        id="mk_1",
        subject="user.coffee",
        observation="black",
        evidence={"note": "day 0"},
        initial_strength=0.7,
        half_life_days=14,
        at=days[0],
    )
    boosts = [
        Reinforcement.of(
            mark, signal, evidence={"note": f"day {n}"}, delta=0.2, id=f"rf_{n}", at=days[n]
        )
        for n in (3, 5, 1)
    ]
    ordered, [moved] = in_evidence_order([(mark, b) for b in boosts])
    assert (moved.first_observed_at, moved.evidence) == (days[5], {"note": "day 5"})
    assert moved.last_reinforced_at == days[0]
    assert [(r.id, r.reinforced_at, r.evidence["note"]) for _, r in ordered] == [
        ("rf_3", days[0], "day 0"),
        ("rf_5", days[3], "day 3"),
        ("rf_1", days[1], "day 1"),
    ]
    assert in_evidence_order([(moved, b) for b in boosts[2:]]) == ([(moved, boosts[2])], [])


@pytest.mark.asyncio
async def test_one_batch_with_its_evidence_out_of_order_makes_one_mark_dated_by_the_oldest(
    store: Store,
) -> None:
    receptor = ObservationReceptor()
    late = make_signal("memory.observation", COFFEE)
    early = make_signal(
        "memory.observation", COFFEE | {"observed_at": (T0 - timedelta(days=9)).isoformat()}
    )
    store.write_sync(lambda tx: receptor.apply_batch(tx, [late, early]))
    [mark] = marks(store)
    assert (mark.id, mark.first_observed_at, mark.last_reinforced_at) == (
        Mark.id_for_signal(late.id),
        T0 - timedelta(days=9),
        T0,
    )
    assert mark.evidence["signal_ids"] == [early.id]
