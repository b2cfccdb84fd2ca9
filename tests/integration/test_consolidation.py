"""memory.consolidate: a day's log becomes marks, the file is archived, faded marks wither."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support import FAST_RETRY, T0, emit_and_settle, last_error, make_signal
from test_marks_store import make_mark

from daemon.bus import SignalBus
from daemon.core.records import Mark
from daemon.files.compost import Compost
from daemon.files.daily import DailyLog
from daemon.files.substrate import Substrate
from daemon.schema.recall import RecallQuery
from daemon.services.recall import Memory, recall
from daemon.store import Store
from receptors.consolidation import ConsolidationReceptor, default_day
from receptors.extractors import MockExtractor
from receptors.observation import ObservationReceptor

BERLIN = ZoneInfo("Europe/Berlin")
DAY = date(2026, 4, 11)
LOG = [
    "Morning pages.",
    "OBS subject=user.food.vegetables Arnold recommends 180C for 20 min",
    "Deep work on Cambium.",
    "OBS subject=user.sleep.bedtime went to bed after midnight",
    "Lunch with Arnold.",
    "OBS subject=user.focus protects afternoons for deep work",
]


class FailingArchive(DailyLog):
    """Fails to merge the first ``failures`` times: a crash after marks, before archive."""

    def __init__(self, directory: Path, failures: int) -> None:
        super().__init__(directory)
        self.failures = failures

    def merge(self, day: date) -> None:
        if self.failures and self.read(day, archived=True) is None:
            self.failures -= 1
            raise OSError("disk hiccup while archiving")
        super().merge(day)


def clock() -> datetime:
    """The consolidation runs the night after the logged day (the wither sweep uses it)."""
    return T0 + timedelta(days=1)


def write_day(directory: Path, day: date, lines: list[str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{day.isoformat()}.md"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def receptor(store: Store, daily: DailyLog) -> ConsolidationReceptor:
    return ConsolidationReceptor(store, daily, MockExtractor(), zone=BERLIN, decay_days=14)


def all_marks(store: Store) -> list[Mark]:
    found = store.read_sync(lambda tx: tx.marks.find("default", "", ("active", "withered")))
    return sorted(found, key=lambda m: m.evidence.get("line_range", [0])[0])


def consolidate(payload: dict[str, Any], **fields: Any) -> Any:
    return make_signal("memory.consolidate", payload, source_id="rhythm:consolidation", **fields)


@pytest.mark.asyncio
async def test_three_obs_lines_become_three_marks_and_the_day_is_archived(
    store: Store, tmp_path: Path
) -> None:
    daily = DailyLog(tmp_path / "daily")
    write_day(tmp_path / "daily", DAY, LOG)
    async with SignalBus(store, [receptor(store, daily)], clock=clock) as bus:
        signal = consolidate({"date": "2026-04-11"})
        assert await emit_and_settle(bus, signal) == {"consolidation": "delivered"}
    marks = all_marks(store)
    assert [(m.subject, m.evidence["line_range"]) for m in marks] == [
        ("user.food.vegetables", [2, 2]),
        ("user.sleep.bedtime", [4, 4]),
        ("user.focus", [6, 6]),
    ]
    assert marks[0].observation == "Arnold recommends 180C for 20 min"
    assert marks[0].evidence == {
        "daily_file": "2026-04-11.md",
        "line_range": [2, 2],
        "signal_ids": [signal.id],
    }
    assert marks[0].initial_strength == 0.7 and marks[0].half_life_days == 14
    assert not (tmp_path / "daily" / "2026-04-11.md").exists()
    assert daily.read(DAY, archived=True) == LOG

    memory = Memory(store, Substrate([]), daily, Compost(tmp_path / "compost"), "default", BERLIN)
    result = recall(RecallQuery(about="user.food"), memory, T0)
    assert [m.mark.subject for m in result.marks] == ["user.food.vegetables"]
    # The mark's own evidence line comes first (the other OBS lines match "user" as text).
    first = result.daily[0]
    assert (first.date, first.line_range, first.excerpt) == ("2026-04-11", (2, 2), LOG[1])


@pytest.mark.asyncio
async def test_recall_shows_a_marks_own_line_once_after_its_day_was_noted_again(
    store: Store, tmp_path: Path
) -> None:
    daily = DailyLog(tmp_path / "daily")
    lunch = [
        "Had lunch with Bea, who recommends the ramen place",
        "OBS subject=user.food likes ramen",
    ]
    write_day(tmp_path / "daily", DAY, lunch)
    async with SignalBus(store, [receptor(store, daily)], clock=clock) as bus:
        assert await emit_and_settle(bus, consolidate({"date": "2026-04-11"})) == {
            "consolidation": "delivered"
        }
    # A line for the day written after it was archived: a live file numbered from 1 again.
    daily.append(DAY, "went for a run")
    daily.append(DAY, "called mum")
    memory = Memory(store, Substrate([]), daily, Compost(tmp_path / "compost"), "default", BERLIN)
    result = recall(RecallQuery(about="ramen"), memory, T0)
    # The mark's line (archived line 2), within the search's hit (lines 1-2), shown once.
    assert [(h.line_range, h.excerpt.splitlines()) for h in result.daily] == [((1, 2), lunch)]


@pytest.mark.asyncio
async def test_a_crash_between_marks_and_archive_is_retried_without_duplicates(
    store: Store, tmp_path: Path
) -> None:
    daily = FailingArchive(tmp_path / "daily", failures=2)
    write_day(tmp_path / "daily", DAY, LOG)
    async with SignalBus(store, [receptor(store, daily)], retry=FAST_RETRY, clock=clock) as bus:
        signal = consolidate({"date": "2026-04-11"})
        assert await emit_and_settle(bus, signal) == {"consolidation": "delivered"}
    assert len(all_marks(store)) == 3
    assert daily.read(DAY) is None and daily.read(DAY, archived=True) == LOG


@pytest.mark.asyncio
async def test_late_lines_are_appended_to_the_archive_and_evidence_follows_them(
    store: Store, tmp_path: Path
) -> None:
    daily = DailyLog(tmp_path / "daily")
    write_day(tmp_path / "daily", DAY, LOG)
    async with SignalBus(store, [receptor(store, daily)], clock=clock) as bus:
        await emit_and_settle(bus, consolidate({"date": "2026-04-11"}))
        late = ["A late thought.", "OBS subject=user.food.fruit apples in the evening"]
        write_day(tmp_path / "daily", DAY, late)
        await emit_and_settle(bus, consolidate({"date": "2026-04-11"}))
    assert daily.read(DAY, archived=True) == LOG + late, "no line lost or overwritten"
    fruit = [m for m in all_marks(store) if m.subject == "user.food.fruit"]
    assert fruit[0].evidence["line_range"] == [8, 8]
    assert daily.evidence("2026-04-11.md", (8, 8)).excerpt == late[1]  # type: ignore[union-attr]
    assert len(all_marks(store)) == 4


@pytest.mark.asyncio
async def test_missing_or_already_archived_day_is_a_no_op(store: Store, tmp_path: Path) -> None:
    daily = DailyLog(tmp_path / "daily")
    write_day(tmp_path / "daily", DAY, LOG)
    async with SignalBus(store, [receptor(store, daily)], clock=clock) as bus:
        assert await emit_and_settle(bus, consolidate({"date": "2026-01-01"})) == {
            "consolidation": "delivered"
        }
        await emit_and_settle(bus, consolidate({"date": "2026-04-11"}))
        await emit_and_settle(bus, consolidate({"date": "2026-04-11"}))
    assert len(all_marks(store)) == 3
    assert daily.read(DAY, archived=True) == LOG


def test_default_day_is_yesterday_in_the_configured_zone() -> None:
    # 23:30 UTC on 10 April is already 01:30 on 11 April in Berlin: yesterday is 10 April.
    late_evening_utc = T0.replace(day=10, hour=23, minute=30)
    assert default_day(late_evening_utc, BERLIN) == date(2026, 4, 10)
    assert default_day(T0.replace(hour=1), BERLIN) == date(2026, 4, 10)


@pytest.mark.asyncio
async def test_without_a_date_it_consolidates_yesterday(store: Store, tmp_path: Path) -> None:
    daily = DailyLog(tmp_path / "daily")
    write_day(tmp_path / "daily", DAY, LOG)
    async with SignalBus(store, [receptor(store, daily)], clock=clock) as bus:
        emitted = T0 + timedelta(days=1, hours=1)  # 03:00 Berlin on 12 April
        await emit_and_settle(bus, consolidate({}, emitted_at=emitted))
    assert len(all_marks(store)) == 3


@pytest.mark.asyncio
async def test_the_wither_sweep_runs_after_consolidation(store: Store, tmp_path: Path) -> None:
    daily = DailyLog(tmp_path / "daily")
    old = make_mark("old", "user.old", workspace_id="default", initial_strength=0.3,
                    first_observed_at=T0 - timedelta(days=60))  # fmt: skip
    fresh = make_mark("fresh", "user.fresh", workspace_id="default", first_observed_at=T0)
    store.write_sync(lambda tx: tx.marks.insert([old, fresh]))
    async with SignalBus(store, [receptor(store, daily)], clock=clock) as bus:
        await emit_and_settle(bus, consolidate({"date": "2026-04-10"}))
    states = {m.id: m.state for m in all_marks(store)}
    assert states == {"old": "withered", "fresh": "active"}


@pytest.mark.parametrize("bad", ["../../etc/passwd", "2026-02-30", "2026-4-1", "yesterday"])
@pytest.mark.asyncio
async def test_a_bad_date_is_dead_and_touches_nothing(
    store: Store, tmp_path: Path, bad: str
) -> None:
    daily = DailyLog(tmp_path / "daily")
    write_day(tmp_path / "daily", DAY, LOG)
    async with SignalBus(
        store, [receptor(store, daily), ObservationReceptor()], retry=FAST_RETRY
    ) as bus:
        signal = consolidate({"date": bad})
        assert await emit_and_settle(bus, signal) == {"consolidation": "dead"}
    error = last_error(store, signal.id)
    assert error is not None and error.startswith("payload.date:")
    assert all_marks(store) == []
    assert daily.read(DAY) == LOG


class AppendingExtractor(MockExtractor):
    """Extracts while a note for the same day arrives: the race of issue 11, finding 2,
    made deterministic."""

    def __init__(self, daily: DailyLog, line: str) -> None:
        self.daily = daily
        self.line = line
        self.appended = False

    async def extract(
        self, day: date, lines: Sequence[str], known_subjects: Sequence[str] = ()
    ) -> list[Any]:
        if not self.appended:
            self.appended = True
            self.daily.append(day, self.line)
        return await super().extract(day, lines, known_subjects)


@pytest.mark.asyncio
async def test_a_line_appended_during_a_consolidation_is_not_archived_unread(
    store: Store, tmp_path: Path
) -> None:
    daily = DailyLog(tmp_path / "daily")
    write_day(tmp_path / "daily", DAY, LOG)
    late = "OBS subject=user.food.soup lentil soup, noted while consolidating"
    extractor = AppendingExtractor(daily, late)
    consolidation = ConsolidationReceptor(store, daily, extractor, zone=BERLIN)
    async with SignalBus(store, [consolidation], clock=clock) as bus:
        await emit_and_settle(bus, consolidate({"date": "2026-04-11"}))
        assert daily.read(DAY) == [late], "the late line waits in the next live file"
        assert daily.read(DAY, archived=True) == LOG
        await emit_and_settle(bus, consolidate({"date": "2026-04-11"}))
    soup = [m for m in all_marks(store) if m.subject == "user.food.soup"]
    assert [m.evidence["line_range"] for m in soup] == [[7, 7]]
    assert len(all_marks(store)) == 4
    assert daily.read(DAY, archived=True) == [*LOG, late]


@pytest.mark.asyncio
async def test_through_consolidates_every_live_day_up_to_it_including_late_lines(
    store: Store, tmp_path: Path
) -> None:
    """The nightly payload (issue 11, finding 7): late lines for a day archived earlier
    start a new live file, and the next night's run consolidates them."""
    daily = DailyLog(tmp_path / "daily")
    write_day(tmp_path / "daily", DAY, LOG)
    async with SignalBus(store, [receptor(store, daily)], clock=clock) as bus:
        await emit_and_settle(bus, consolidate({"date": "2026-04-11"}))
        daily.append(DAY, "OBS subject=user.late a late line for an archived day")
        daily.append(DAY + timedelta(days=1), "OBS subject=user.next the next day")
        daily.append(DAY + timedelta(days=2), "OBS subject=user.today not over yet")
        signal = consolidate({"through": "2026-04-12"})
        assert await emit_and_settle(bus, signal) == {"consolidation": "delivered"}
    subjects = sorted(m.subject for m in all_marks(store))
    assert "user.late" in subjects and "user.next" in subjects
    assert "user.today" not in subjects
    assert daily.days(archived=False) == [DAY + timedelta(days=2)]


@pytest.mark.asyncio
async def test_date_and_through_together_are_refused(store: Store, tmp_path: Path) -> None:
    daily = DailyLog(tmp_path / "daily")
    async with SignalBus(store, [receptor(store, daily)], retry=FAST_RETRY) as bus:
        signal = consolidate({"date": "2026-04-11", "through": "2026-04-11"})
        assert await emit_and_settle(bus, signal) == {"consolidation": "dead"}
    error = last_error(store, signal.id)
    assert error is not None and "not both" in error


@pytest.mark.asyncio
async def test_a_claim_left_by_a_crash_is_consolidated_again_without_duplicates(
    store: Store, tmp_path: Path
) -> None:
    daily = DailyLog(tmp_path / "daily")
    write_day(tmp_path / "daily", DAY, LOG)
    claim = daily.claim(DAY)  # the crash came right after the claim
    assert claim is not None and claim.lines == LOG
    daily.append(DAY, "OBS subject=user.after a line after the claim")
    async with SignalBus(store, [receptor(store, daily)], clock=clock) as bus:
        await emit_and_settle(bus, consolidate({"date": "2026-04-11"}))
        await emit_and_settle(bus, consolidate({"date": "2026-04-11"}))
    assert len(all_marks(store)) == 4
    assert daily.read(DAY, archived=True) == [*LOG, "OBS subject=user.after a line after the claim"]
    assert daily.read(DAY) is None


@pytest.mark.asyncio
async def test_a_refused_day_does_not_stop_the_sweep_but_fails_visibly(
    store: Store, tmp_path: Path
) -> None:
    daily = DailyLog(tmp_path / "daily")
    outside = tmp_path / "SOUL.md"
    outside.write_text("# Soul\n")
    (tmp_path / "daily").mkdir()
    (tmp_path / "daily" / "archive").mkdir()
    (tmp_path / "daily" / "archive" / ".2026-04-09.md.incoming").symlink_to(outside)
    write_day(tmp_path / "daily", DAY, LOG)
    async with SignalBus(store, [receptor(store, daily)], retry=FAST_RETRY, clock=clock) as bus:
        signal = consolidate({"through": "2026-04-11"})
        assert await emit_and_settle(bus, signal) == {"consolidation": "dead"}
    assert len(all_marks(store)) == 3, "the other day was consolidated"
    error = last_error(store, signal.id)
    assert error is not None and "refused" in error
    assert outside.read_text() == "# Soul\n"
