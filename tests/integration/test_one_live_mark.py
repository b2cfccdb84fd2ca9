"""One live mark per fact: a promoted mark (its seed was accepted) is the mark a repeat of
its fact reinforces, whether the repeat is observed or consolidated; it stays promoted."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support import T0, emit_and_settle, make_signal

from daemon.bus import SignalBus
from daemon.core.records import CURRENT_MARK_STATES, Mark
from daemon.files.daily import DailyLog
from daemon.store import Store
from receptors.consolidation import ConsolidationReceptor
from receptors.extractors import MockExtractor
from receptors.observation import ObservationReceptor

COFFEE: dict[str, Any] = {
    "subject": "user.coffee",
    "observation": "Takes coffee black, no sugar",
    "evidence": {"note": "chat"},
}


def live_marks(store: Store) -> list[Mark]:
    return store.read_sync(lambda tx: tx.marks.find("default", "", CURRENT_MARK_STATES))


async def promoted_coffee(store: Store, bus: SignalBus) -> Mark:
    await emit_and_settle(bus, make_signal("memory.observation", COFFEE))
    [mark] = live_marks(store)
    store.write_sync(lambda tx: tx.marks.promote([mark.id], T0 + timedelta(hours=1)))
    return mark


@pytest.mark.parametrize(
    "repeat",
    [
        "Takes coffee black, no sugar",  # the same words (found by fingerprint)
        "No sugar: takes coffee black",  # a near copy (found among the recent marks)
    ],
)
@pytest.mark.asyncio
async def test_observing_a_promoted_fact_again_reinforces_it(store: Store, repeat: str) -> None:
    async with SignalBus(store, [ObservationReceptor()]) as bus:
        mark = await promoted_coffee(store, bus)
        again = make_signal(
            "memory.observation", COFFEE | {"observation": repeat}, emitted_at=T0 + timedelta(1)
        )
        assert await emit_and_settle(bus, again) == {"observation": "delivered"}
    [kept] = live_marks(store)
    assert (kept.id, kept.state, kept.reinforcement_count) == (mark.id, "promoted", 1)
    assert kept.last_reinforced_at == T0 + timedelta(1)


@pytest.mark.asyncio
async def test_consolidating_a_promoted_fact_again_reinforces_it(
    store: Store, tmp_path: Path
) -> None:
    daily = DailyLog(tmp_path / "daily")
    day = date(2026, 4, 12)
    daily.append(day, "OBS subject=user.coffee takes coffee black, no sugar")
    consolidation = ConsolidationReceptor(
        store, daily, MockExtractor(), zone=ZoneInfo("UTC"), decay_days=14
    )
    async with SignalBus(store, [ObservationReceptor(), consolidation]) as bus:
        mark = await promoted_coffee(store, bus)
        night = make_signal(
            "memory.consolidate", {"date": day.isoformat()}, emitted_at=T0 + timedelta(days=2)
        )
        assert set((await emit_and_settle(bus, night)).values()) == {"delivered"}
    [kept] = live_marks(store)
    assert (kept.id, kept.state, kept.reinforcement_count) == (mark.id, "promoted", 1)
