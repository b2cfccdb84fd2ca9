"""Loom's "this week" page through the real app on a real store and bus (SQLite and
PostgreSQL): what the memory learned in the seven days of the configured time zone up to
today, each kind counted, nothing from just outside the week."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from test_loom import NOW, REINFORCED, lentil_mark, observation, open_loom, plant
from test_loom_review import review

from daemon.core.records import Mark
from daemon.services.governance import ForgetTarget
from daemon.store import Store

# The week up to NOW (Wednesday 20 May) in Europe/Berlin: from Thursday 14 May 00:00 CEST.
WEEK_START = datetime(2026, 5, 13, 22, 0, tzinfo=UTC)


def section(page: str, name: str) -> str:
    found = re.search(rf'<section id="week-{name}">(.*?)</section>', page, re.S)
    assert found, f"no section {name}"
    return found[1]


def heading(page: str, name: str) -> str:
    found = re.search(r"<h2>([^<]+)</h2>", section(page, name))
    assert found
    return found[1]


@pytest.mark.asyncio
async def test_the_week_shows_what_was_made_reinforced_withered_forgotten_planted_reviewed(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        await lentil_mark(loom)  # made 1 May, reinforced 10 May: the week before's
        just_before = WEEK_START - timedelta(microseconds=1)
        await loom.emit(observation("user.a", "said just before", just_before, {"note": "n"}))
        first = await loom.emit(
            observation("user.b", "said at the start", WEEK_START, {"note": "n"})
        )
        await loom.emit(observation("user.b", "said at the start", NOW, {"note": "again"}))
        faded = await loom.emit(
            observation("user.c", "faded", NOW - timedelta(days=1), {"note": "n"})
        )
        await loom.store.write(
            lambda tx: tx.marks.set_state([Mark.id_for_signal(faded)], "withered", NOW)
        )
        gone = await loom.emit(observation("user.d", "private", NOW, {"note": "n"}))
        await loom.services.commands.forget(
            ForgetTarget(mark_id=Mark.id_for_signal(gone)), "no longer true", "ada"
        )
        old_seed = await plant(loom, "sig-plant-old", "user.food", [])
        new_seed = await plant(loom, "sig-plant-new", "user.drink", [], at=NOW)
        await review(loom, old_seed, "accepted")

        page = await loom.page("/loom/week")
        assert "2026-05-14 to 2026-05-20, from 2026-05-14 00:00 CEST" in page
        assert heading(page, "made") == "Marks made (3)"  # at the start, faded, the forgotten
        made = section(page, "made")
        assert "said at the start" in made and "just before" not in made and "lentil" not in made
        assert 'class="tombstone">forgotten' in made  # forgotten this week: no text left
        assert heading(page, "reinforced") == "Marks reinforced (1)"
        assert "said at the start" in section(page, "reinforced")
        assert f'href="/loom/marks/{Mark.id_for_signal(first)}"' in section(page, "reinforced")
        assert heading(page, "withered") == "Marks withered (1)"
        assert "faded" in section(page, "withered")
        assert heading(page, "forgotten") == "Forgotten (1)"
        assert "no longer true" in section(page, "forgotten")
        assert "private" not in page
        assert heading(page, "planted") == "Seeds planted (1)"
        assert new_seed in section(page, "planted") and old_seed not in section(page, "planted")
        assert heading(page, "reviewed") == "Seeds reviewed (1)"
        assert old_seed in section(page, "reviewed")

        before = await loom.page("/loom/week", ago="1")
        assert "2026-05-07 to 2026-05-13" in before
        assert heading(before, "made") == "Marks made (1)" and "just before" in before
        assert heading(before, "reinforced") == "Marks reinforced (1)"
        assert REINFORCED.astimezone(loom.services.memory.zone).strftime("%H:%M") in before
        for bad in ("-1", "x", "521"):
            refused = await loom.client.get("/loom/week", params={"ago": bad})
            assert refused.status_code == 422 and "ago: must be a whole number" in refused.text


@pytest.mark.asyncio
async def test_a_busy_week_lists_the_newest_and_counts_the_rest(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("daemon.loom.finding.WEEK_LIMIT", 2)
    async with open_loom(store, tmp_path) as loom:
        for hours in (1, 2, 3):
            at = NOW - timedelta(hours=hours)
            await loom.emit(observation(f"user.n{hours}", f"note {hours}", at, {"note": "n"}))
        elsewhere = observation("user.n0", "note 0", NOW, {"note": "n"}, workspace_id="other")
        await loom.emit(elsewhere)
        await loom.emit(elsewhere | {"payload": elsewhere["payload"] | {"evidence": {"note": "m"}}})
        [other] = loom.store.read_sync(lambda tx: tx.marks.find("other", "", ("active",)))
        assert other.reinforcement_count == 1
        made = section(await loom.page("/loom/week"), "made")
        assert re.findall(r">note (\d)</a>", made) == ["1", "2"]  # another workspace's: not
        assert "and 1 more." in made
        assert "Marks reinforced (0)" in await loom.page("/loom/week")
