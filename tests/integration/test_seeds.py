"""memory.seed_planted / memory.seed_reviewed: stored, reviewed by a human, never applied."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from support import FAST_RETRY, T0, emit_and_settle, last_error, make_signal

from daemon.bus import SignalBus
from daemon.store import Store
from receptors.observation import ObservationReceptor
from receptors.seeds import SeedReceptor

OBSERVATION = {
    "subject": "user.food.vegetables",
    "observation": "Arnold said 180C",
    "evidence": {"note": "told in chat"},
}


def plant(
    target: str = "long-term/lessons.md", based_on: list[str] | None = None
) -> dict[str, Any]:
    return {
        "subject": "user.food.vegetables",
        "proposed_change": "add: vegetables at 180C for 20 min",
        "target_file": target,
        "based_on_marks": based_on or [],
    }


@pytest.mark.asyncio
async def test_accepting_a_seed_promotes_its_marks_and_leaves_the_file_alone(
    store: Store, tmp_path: Path
) -> None:
    target = tmp_path / "lessons.md"
    target.write_text("# Lessons\n")
    before = (target.read_bytes(), target.stat().st_mtime_ns)
    async with SignalBus(store, [ObservationReceptor(), SeedReceptor()]) as bus:
        await emit_and_settle(bus, make_signal("memory.observation", OBSERVATION))
        [mark] = store.read_sync(lambda tx: tx.marks.find("default", ""))
        await emit_and_settle(
            bus, make_signal("memory.seed_planted", plant(str(target), [mark.id]))
        )
        [seed] = store.read_sync(lambda tx: tx.seeds.listing("default", "pending"))
        assert seed.planted_by == "agent-observer"
        assert seed.based_on_marks == [mark.id]
        review = {"seed_id": seed.id, "decision": "accepted", "reviewer": "joshua"}
        reviewed_at = T0 + timedelta(days=1)
        status = await emit_and_settle(
            bus, make_signal("memory.seed_reviewed", review, emitted_at=reviewed_at)
        )
        assert status == {"seeds": "delivered"}
    accepted = store.read_sync(lambda tx: tx.seeds.get(seed.id, "default"))
    assert accepted is not None
    assert (accepted.state, accepted.reviewed_by, accepted.reviewed_at) == (
        "accepted",
        "joshua",
        reviewed_at,
    )
    promoted = store.read_sync(lambda tx: tx.marks.get(mark.id))
    assert promoted is not None and promoted.state == "promoted"
    assert (target.read_bytes(), target.stat().st_mtime_ns) == before


@pytest.mark.asyncio
async def test_rejecting_keeps_marks_active(store: Store) -> None:
    async with SignalBus(store, [SeedReceptor()]) as bus:
        await emit_and_settle(bus, make_signal("memory.seed_planted", plant()))
        [seed] = store.read_sync(lambda tx: tx.seeds.listing("default"))
        review = {"seed_id": seed.id, "decision": "rejected", "reviewer": "joshua"}
        await emit_and_settle(bus, make_signal("memory.seed_reviewed", review))
    rejected = store.read_sync(lambda tx: tx.seeds.get(seed.id, "default"))
    assert rejected is not None and rejected.state == "rejected"


@pytest.mark.asyncio
async def test_reviewing_an_accepted_seed_is_refused(store: Store) -> None:
    async with SignalBus(store, [SeedReceptor()], retry=FAST_RETRY) as bus:
        await emit_and_settle(bus, make_signal("memory.seed_planted", plant()))
        [seed] = store.read_sync(lambda tx: tx.seeds.listing("default"))
        accept = {"seed_id": seed.id, "decision": "accepted", "reviewer": "joshua"}
        await emit_and_settle(bus, make_signal("memory.seed_reviewed", accept))
        again = make_signal("memory.seed_reviewed", accept | {"decision": "rejected"})
        assert await emit_and_settle(bus, again) == {"seeds": "dead"}
        missing = make_signal("memory.seed_reviewed", accept | {"seed_id": "sd_nope"})
        assert await emit_and_settle(bus, missing) == {"seeds": "dead"}
    assert last_error(store, again.id) == f"payload.seed_id: seed {seed.id} is already accepted"
    assert last_error(store, missing.id) == "payload.seed_id: no seed sd_nope"
    final = store.read_sync(lambda tx: tx.seeds.get(seed.id, "default"))
    assert final is not None and final.state == "accepted"


@pytest.mark.parametrize(
    ("signal_type", "payload", "field"),
    [
        ("memory.seed_planted", plant("../outside.md"), "target_file"),
        ("memory.seed_planted", plant("long-term/lessons.txt"), "target_file"),
        ("memory.seed_planted", plant() | {"proposed_change": ""}, "proposed_change"),
        ("memory.seed_planted", {k: v for k, v in plant().items() if k != "subject"}, "subject"),
        (
            "memory.seed_reviewed",
            {"seed_id": "x", "decision": "maybe", "reviewer": "j"},
            "decision",
        ),
        (
            "memory.seed_reviewed",
            {"seed_id": "x", "decision": "accepted", "reviewer": ""},
            "reviewer",
        ),
    ],
)
@pytest.mark.asyncio
async def test_contract_violations_are_dead_and_write_nothing(
    store: Store, signal_type: str, payload: dict[str, Any], field: str
) -> None:
    async with SignalBus(store, [SeedReceptor()], retry=FAST_RETRY) as bus:
        signal = make_signal(signal_type, payload)
        assert await emit_and_settle(bus, signal) == {"seeds": "dead"}
    error = last_error(store, signal.id)
    assert error is not None and error.startswith(f"payload.{field}:")
    assert store.read_sync(lambda tx: tx.seeds.listing("default")) == []
