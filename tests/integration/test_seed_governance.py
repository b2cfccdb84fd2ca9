"""Seeds that are gated, checked, undone and withered; the weekly digest rhythm."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support import FAST_RETRY, T0, emit_and_settle, last_error, make_signal
from test_marks_store import plant_seeds, seed

from daemon.bus import SignalBus
from daemon.config import parse_config
from daemon.core.seed_gates import seed_refusal
from daemon.files.daily import DailyLog
from daemon.services.errors import Conflict
from daemon.services.review import reviewable, wither
from daemon.store import Store
from receptors.digest import DigestReceptor
from receptors.observation import ObservationReceptor
from receptors.seeds import SeedReceptor
from rhythms.template import next_slot

BERLIN = ZoneInfo("Europe/Berlin")


def plant(change: str = "roast vegetables at 180C for 20 min", **more: Any) -> dict[str, Any]:
    return {
        "subject": "user.food.vegetables",
        "proposed_change": change,
        "target_file": "long-term/lessons.md",
    } | more


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("done", "status-shaped"),
        ("Fixed.", "status-shaped"),
        ("completed on 2026-03-02", "status-shaped"),
        ("2026-03-02: finished the move", "status-shaped"),
        ("Cambium should keep more marks about food", "self-referential"),
        ("these seeds keep coming back", "self-referential"),
        ("the wifi password: hunter2hunter2", "carries-a-secret"),
        ("use key sk-proj-abcdefghijklmnopqrstuvwxyz012345", "carries-a-secret"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "carries-a-secret"),
    ],
)
def test_each_gate_names_its_rule(text: str, rule: str) -> None:
    refusal = seed_refusal(text)
    assert refusal is not None and refusal.rule == rule


@pytest.mark.parametrize(
    "text",
    [
        "prefers tea over coffee after 15:00",
        "plant tomato seeds indoors in March",
        "Ada is done with school by 15:00 on weekdays",
        "keeps a reading log of every book finished",
    ],
)
def test_knowledge_passes_the_gates(text: str) -> None:
    assert seed_refusal(text) is None


@pytest.mark.asyncio
async def test_planting_is_refused_naming_the_rule_or_the_missing_mark(store: Store) -> None:
    async with SignalBus(store, [ObservationReceptor(), SeedReceptor()], retry=FAST_RETRY) as bus:
        for text, rule in (
            ("done", "status-shaped"),
            ("this memory system forgets too much", "self-referential"),
            ("token = ghp_abcdefghijklmnopqrstuvwxyz0123456789", "carries-a-secret"),
        ):
            signal = make_signal("memory.seed_planted", plant(text))
            assert await emit_and_settle(bus, signal) == {"seeds": "dead"}
            error = str(last_error(store, signal.id))
            assert error.startswith("payload.proposed_change: refused by the " + rule), error
        made_up = make_signal("memory.seed_planted", plant(based_on_marks=["mk_made_up"]))
        assert await emit_and_settle(bus, made_up) == {"seeds": "dead"}
        assert str(last_error(store, made_up.id)) == (
            "payload.based_on_marks.0: no mark mk_made_up in this workspace"
        )
        observed = make_signal(
            "memory.observation",
            {"subject": "user.food", "observation": "likes roast", "evidence": {"note": "n"}},
        )
        await emit_and_settle(bus, observed)
        mark = store.read_sync(lambda tx: tx.marks.made_by(observed.id))
        assert mark is not None
        good = make_signal("memory.seed_planted", plant(based_on_marks=[mark.id]))
        assert await emit_and_settle(bus, good) == {"seeds": "delivered"}
    assert [s.based_on_marks for s in store.read_sync(lambda tx: tx.seeds.listing("default"))] == [
        [mark.id]
    ]


@pytest.mark.asyncio
async def test_a_review_is_undone_within_the_window_and_not_after(store: Store) -> None:
    seeds = SeedReceptor(undo_hours=24)
    async with SignalBus(store, [ObservationReceptor(), seeds], retry=FAST_RETRY) as bus:
        observed = make_signal(
            "memory.observation",
            {"subject": "user.food", "observation": "likes roast", "evidence": {"note": "n"}},
        )
        await emit_and_settle(bus, observed)
        mark = store.read_sync(lambda tx: tx.marks.made_by(observed.id))
        assert mark is not None
        await emit_and_settle(
            bus, make_signal("memory.seed_planted", plant(based_on_marks=[mark.id]))
        )
        [seed] = store.read_sync(lambda tx: tx.seeds.listing("default"))

        async def send(kind: str, at: datetime, **payload: Any) -> dict[str, str]:
            signal = make_signal(
                kind, {"seed_id": seed.id, "reviewer": "ada"} | payload, emitted_at=at
            )
            return await emit_and_settle(bus, signal)

        assert await send("memory.seed_reviewed", T0, decision="accepted") == {"seeds": "delivered"}
        assert store.read_sync(lambda tx: tx.marks.get(mark.id)).state == "promoted"  # type: ignore[union-attr]
        assert await send("memory.seed_review_undone", T0 + timedelta(hours=23)) == {
            "seeds": "delivered"
        }
        undone = store.read_sync(lambda tx: tx.seeds.get(seed.id, "default"))
        assert undone is not None and (undone.state, undone.reviewed_by) == ("pending", None)
        assert store.read_sync(lambda tx: tx.marks.get(mark.id)).state == "active"  # type: ignore[union-attr]

        reviewed_at = T0 + timedelta(days=1)
        assert await send("memory.seed_reviewed", reviewed_at, decision="rejected") == {
            "seeds": "delivered"
        }
        late = make_signal(
            "memory.seed_review_undone",
            {"seed_id": seed.id, "reviewer": "ada"},
            emitted_at=reviewed_at + timedelta(hours=25),
        )
        assert await emit_and_settle(bus, late) == {"seeds": "dead"}
        assert "can no longer be undone" in str(last_error(store, late.id))
    final = store.read_sync(lambda tx: tx.seeds.get(seed.id, "default"))
    assert final is not None and final.state == "rejected"


@pytest.mark.asyncio
async def test_a_seed_left_pending_too_long_cannot_be_reviewed(store: Store) -> None:
    async with SignalBus(store, [SeedReceptor(wither_days=30)], retry=FAST_RETRY) as bus:
        await emit_and_settle(bus, make_signal("memory.seed_planted", plant()))
        [seed] = store.read_sync(lambda tx: tx.seeds.listing("default"))
        review = make_signal(
            "memory.seed_reviewed",
            {"seed_id": seed.id, "decision": "accepted", "reviewer": "ada"},
            emitted_at=T0 + timedelta(days=31),
        )
        assert await emit_and_settle(bus, review) == {"seeds": "dead"}
    assert "withered: not reviewed within 30 days" in str(last_error(store, review.id))


@pytest.mark.parametrize(
    ("past_the_window", "withers"), [(timedelta(0), False), (timedelta(seconds=1), True)]
)
def test_a_seed_withers_exactly_when_it_can_no_longer_be_reviewed(
    store: Store, past_the_window: timedelta, withers: bool
) -> None:
    planted = seed("s1", 0, workspace="default")
    plant_seeds(store, planted)
    now = planted.planted_at + timedelta(days=30) + past_the_window
    try:
        store.read_sync(lambda tx: reviewable(tx, "default", "s1", now, wither_days=30))
        refused = False
    except Conflict:
        refused = True
    assert refused is withers
    assert store.write_sync(lambda tx: wither(tx, "default", now, wither_days=30)) == int(withers)


@pytest.mark.asyncio
async def test_the_weekly_digest_across_two_weeks_and_a_clock_change(
    store: Store, tmp_path: Path
) -> None:
    """The bundled rhythm fires Sunday 18:00 Berlin time on both sides of the 2026-10-25
    change to winter time; each fire withers overdue seeds and appends the digest to that
    Sunday's log."""
    config = parse_config({"timezone": "Europe/Berlin"})
    [digest] = [t for t in config.rhythm_templates() if t.name == "seed_digest"]
    start = datetime(2026, 10, 15, 12, 0, tzinfo=BERLIN)
    first = next_slot(digest, start)
    second = next_slot(digest, first)
    assert first.astimezone(BERLIN).isoformat() == "2026-10-18T18:00:00+02:00"
    assert second.astimezone(BERLIN).isoformat() == "2026-10-25T18:00:00+01:00"
    assert second - first == timedelta(days=7, hours=1)

    daily = DailyLog(tmp_path / "daily")
    receptors = [SeedReceptor(), DigestReceptor(store, daily, zone=BERLIN, wither_days=30)]
    async with SignalBus(store, receptors, retry=FAST_RETRY) as bus:

        async def plant_at(at: datetime, change: str) -> None:
            signal = make_signal("memory.seed_planted", plant(change), emitted_at=at)
            assert await emit_and_settle(bus, signal) == {"seeds": "delivered"}

        async def fire(slot: datetime) -> None:
            assert await emit_and_settle(bus, digest.signal_for(slot, slot)) == {
                "digest": "delivered"
            }
            # The same slot fired again (a restart) is stored once: nothing appended twice.
            assert (await bus.emit(digest.signal_for(slot, slot))).duplicate

        await plant_at(first - timedelta(days=35), "roast oldest vegetables")
        await plant_at(first - timedelta(days=33), "roast older vegetables")
        await plant_at(first - timedelta(days=26), "roast recent vegetables")
        await fire(first)
        await plant_at(first + timedelta(days=3), "roast newest vegetables")
        await fire(second)

    seeds = {s.proposed_change: s for s in store.read_sync(lambda tx: tx.seeds.listing("default"))}
    recent, newest = seeds["roast recent vegetables"], seeds["roast newest vegetables"]
    review = " — review with `cambium memory seeds --state pending`"
    assert daily.read(first.astimezone(BERLIN).date()) == [
        "seed digest: 1 pending, 2 withered this week" + review,
        f"seed digest: {recent.id} (user.food.vegetables, 26 days old): roast recent vegetables",
    ]
    assert daily.read(second.astimezone(BERLIN).date()) == [
        "seed digest: 1 pending, 1 withered this week" + review,
        f"seed digest: {newest.id} (user.food.vegetables, 4 days old): roast newest vegetables",
    ]
    assert sorted((s.proposed_change, s.state) for s in seeds.values()) == [
        ("roast newest vegetables", "pending"),
        ("roast older vegetables", "withered"),
        ("roast oldest vegetables", "withered"),
        ("roast recent vegetables", "withered"),
    ]
    assert recent.withered_at == second
