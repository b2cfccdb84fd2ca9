"""No near-copies: the same fact said again reinforces its mark instead of adding one."""

from __future__ import annotations

import tracemalloc
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from support import FAST_RETRY, T0, emit_and_settle, make_signal
from test_consolidation import BERLIN, FailingArchive, all_marks, consolidate, write_day

from daemon.bus import SignalBus
from daemon.core import likeness
from daemon.core.likeness import is_near_copy, normalize_text, similarity
from daemon.store import Store
from receptors.consolidation import ConsolidationReceptor, wither_sweep
from receptors.extractors import MockExtractor
from receptors.observation import ObservationReceptor


def observe(subject: str, text: str, **fields: Any) -> Any:
    payload = {"subject": subject, "observation": text, "evidence": {"note": "test"}}
    return make_signal("memory.observation", payload, **fields)


async def observe_all(store: Store, signals: list[Any], **settings: Any) -> list[str]:
    async with SignalBus(store, [ObservationReceptor(**settings)]) as bus:
        return [(await emit_and_settle(bus, s))["observation"] for s in signals]


def test_case_whitespace_and_punctuation_do_not_make_a_different_text() -> None:
    assert normalize_text("  Likes  LENTIL soup. ") == "likes lentil soup"
    assert similarity("Likes lentil soup", "likes  lentil soup.") == 1.0
    assert similarity("went to bed at 23:00", "went to bed at 22:00") < 0.9


def test_the_words_remembered_for_the_check_stay_within_their_bound() -> None:
    """Every observation's words are remembered for the next comparison. Without a bound by
    size, 4,000 observations of 16,000 characters held 1.1 GB in the daemon."""
    likeness.drop_cached_words()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(300):
            long = " ".join(f"w{n}x{i}" for i in range(2_000))  # about 16,000 characters
            short = f"short observation number {n} " + "words " * 20
            assert not is_near_copy(long, short)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert likeness._words.characters <= likeness.CACHED_CHARACTERS
    assert held < 25_000_000, f"{held / 1e6:.0f} MB remembered"
    # (short texts are still remembered: the next comparison finds them)
    assert likeness._words.characters >= 300 * len("short observation number 1 ")
    likeness.drop_cached_words()


@pytest.mark.asyncio
async def test_likes_lentil_soup_twice_is_one_mark_reinforced_once(store: Store) -> None:
    outcomes = await observe_all(
        store,
        [
            observe("user.food.soup", "Likes lentil soup"),
            observe("user.food.soup", "likes  lentil soup.", emitted_at=T0 + timedelta(hours=1)),
        ],
    )
    assert outcomes == ["delivered", "delivered"]
    (mark,) = all_marks(store)
    assert mark.observation == "Likes lentil soup"
    assert mark.reinforcement_count == 1


def test_near_copies_in_one_batch_are_one_mark(store: Store) -> None:
    receptor = ObservationReceptor()
    signals = [
        observe("user.food.soup", "Likes lentil soup"),
        observe("User.Food.Soup", "LIKES LENTIL SOUP!"),
    ]
    store.write_sync(lambda tx: receptor.apply_batch(tx, signals))
    (mark,) = all_marks(store)
    assert mark.reinforcement_count == 1


@pytest.mark.asyncio
async def test_different_facts_and_other_subjects_stay_apart(store: Store) -> None:
    await observe_all(
        store,
        [
            observe("user.sleep.bedtime", "went to bed at 23:00"),
            observe("user.sleep.bedtime", "went to bed at 22:00"),
            observe("user.food.soup", "Likes lentil soup"),
            observe("user.food.lunch", "likes lentil soup"),
        ],
    )
    assert sorted((m.subject, m.observation) for m in all_marks(store)) == [
        ("user.food.lunch", "likes lentil soup"),
        ("user.food.soup", "Likes lentil soup"),
        ("user.sleep.bedtime", "went to bed at 22:00"),
        ("user.sleep.bedtime", "went to bed at 23:00"),
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize(("threshold", "marks"), [(0.9, 2), (0.5, 1)])
async def test_the_similarity_threshold_decides_how_near_is_a_copy(
    store: Store, threshold: float, marks: int
) -> None:
    await observe_all(
        store,
        [
            observe("user.food.soup", "likes lentil soup"),
            observe("user.food.soup", "likes lentil soup a lot"),  # 3 of 5 words shared
        ],
        similarity=threshold,
    )
    assert len(all_marks(store)) == marks


@pytest.mark.asyncio
async def test_a_withered_mark_is_revived_by_its_near_copy(store: Store) -> None:
    first = observe("user.food.soup", "Likes lentil soup", decay_rate=86_400)
    later = observe("user.food.soup", "likes lentil soup.", emitted_at=T0 + timedelta(days=30))
    async with SignalBus(store, [ObservationReceptor()]) as bus:
        await emit_and_settle(bus, first)
        store.write_sync(lambda tx: wither_sweep(tx, "default", T0 + timedelta(days=20)))
        assert all_marks(store)[0].state == "withered"
        await emit_and_settle(bus, later)
    (mark,) = all_marks(store)
    assert (mark.state, mark.reinforcement_count) == ("active", 1)


FIRST, SECOND = date(2026, 4, 10), date(2026, 4, 11)


@pytest.mark.asyncio
async def test_the_same_obs_line_on_two_days_is_one_mark_reinforced_once(
    store: Store, tmp_path: Path
) -> None:
    directory = tmp_path / "daily"
    write_day(directory, FIRST, ["OBS subject=user.food.soup Likes lentil soup"])
    write_day(directory, SECOND, ["Busy day.", "OBS subject=user.food.soup likes  lentil soup."])
    # The second day's archive fails twice: its retries must not reinforce again.
    daily = FailingArchive(directory, failures=0)
    receptor = ConsolidationReceptor(store, daily, MockExtractor(), zone=BERLIN)
    async with SignalBus(store, [receptor], retry=FAST_RETRY, clock=lambda: T0) as bus:
        await emit_and_settle(bus, consolidate({"date": FIRST.isoformat()}))
        daily.failures = 2
        second = consolidate({"date": SECOND.isoformat()}, emitted_at=T0 + timedelta(days=1))
        assert await emit_and_settle(bus, second) == {"consolidation": "delivered"}
    (mark,) = all_marks(store)
    assert mark.evidence["daily_file"] == "2026-04-10.md"
    assert mark.reinforcement_count == 1
    assert mark.provenance == "observed"
