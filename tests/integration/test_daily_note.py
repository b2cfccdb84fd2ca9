"""memory.daily_note: one line appended to the day's log, once."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support import FAST_RETRY, T0, emit_and_settle, last_error, make_signal

from daemon.bus import SignalBus
from daemon.files.daily import DailyLog
from daemon.store import Store
from receptors.daily_note import DailyNoteReceptor

BERLIN = ZoneInfo("Europe/Berlin")


class CrashAfterAppend(DailyLog):
    """Appends, then fails once: as if the process died before marking the delivery done."""

    crashed = False

    def append(self, day: date, line: str, *, unless_after: int | None = None) -> bool:
        appended = super().append(day, line, unless_after=unless_after)
        if not self.crashed:
            self.crashed = True
            raise OSError("killed after the append")
        return appended


def note(payload: dict[str, Any], **fields: Any) -> Any:
    return make_signal("memory.daily_note", payload, **fields)


@pytest.mark.asyncio
async def test_a_note_lands_in_todays_file_in_the_configured_zone(
    store: Store, tmp_path: Path
) -> None:
    daily = DailyLog(tmp_path / "daily")
    async with SignalBus(store, [DailyNoteReceptor(daily, zone=BERLIN)]) as bus:
        # 22:30 UTC on 11 April is 00:30 on 12 April in Berlin.
        late = T0.replace(hour=22, minute=30)
        assert await emit_and_settle(bus, note({"text": "Slept early."}, emitted_at=late)) == {
            "daily": "delivered"
        }
        await emit_and_settle(bus, note({"text": "Back-dated.", "date": "2026-04-01"}))
    assert (tmp_path / "daily" / "2026-04-12.md").read_text() == "Slept early.\n"
    assert daily.read(date(2026, 4, 1)) == ["Back-dated."]


@pytest.mark.asyncio
async def test_a_redelivery_after_a_crash_does_not_append_twice(
    store: Store, tmp_path: Path
) -> None:
    DailyLog(tmp_path / "daily").append(date(2026, 4, 11), "Already there.")
    daily = CrashAfterAppend(tmp_path / "daily")
    async with SignalBus(store, [DailyNoteReceptor(daily, zone=BERLIN)], retry=FAST_RETRY) as bus:
        assert await emit_and_settle(bus, note({"text": "Only once."})) == {"daily": "delivered"}
    assert daily.read(date(2026, 4, 11)) == ["Already there.", "Only once."]


class CrashAfterAppendThenClaimed(DailyLog):
    """Appends, then the process dies; before the redelivery a consolidation claimed the
    day and crashed in turn, so the day waits in the archive's staging file (issue 11,
    finding 3: the old replay check looked at the live file and the archive only)."""

    crashed = False

    def append(self, day: date, line: str, *, unless_after: int | None = None) -> bool:
        appended = super().append(day, line, unless_after=unless_after)
        if not self.crashed:
            self.crashed = True
            archive = self.directory / "archive"
            archive.mkdir(exist_ok=True)
            name = f"{day.isoformat()}.md"
            (self.directory / name).rename(archive / f".{name}.incoming")
            raise OSError("killed after the append")
        return appended


@pytest.mark.asyncio
async def test_a_redelivery_finds_its_line_in_a_day_parked_mid_archive(
    store: Store, tmp_path: Path
) -> None:
    day = date(2026, 4, 11)
    DailyLog(tmp_path / "daily").append(day, "Already there.")
    daily = CrashAfterAppendThenClaimed(tmp_path / "daily")
    async with SignalBus(store, [DailyNoteReceptor(daily, zone=BERLIN)], retry=FAST_RETRY) as bus:
        assert await emit_and_settle(bus, note({"text": "Only once."})) == {"daily": "delivered"}
    daily.archive(day)
    assert daily.read(day, archived=True) == ["Already there.", "Only once."]
    assert daily.read(day) is None


@pytest.mark.asyncio
async def test_a_redelivery_after_the_day_was_archived_and_grew_again_appends_once(
    store: Store, tmp_path: Path
) -> None:
    """The line moved to the archive and a new live file started: found, not repeated;
    and a line equal to one from before the first attempt does not count as found."""
    day = date(2026, 4, 11)
    DailyLog(tmp_path / "daily").append(day, "Water.")

    class ArchivedMeanwhile(DailyLog):
        crashed = False

        def append(self, day: date, line: str, *, unless_after: int | None = None) -> bool:
            appended = super().append(day, line, unless_after=unless_after)
            if not self.crashed:
                self.crashed = True
                self.archive(day)
                super().append(day, "Someone else's later line.")
                raise OSError("killed after the append")
            return appended

    daily = ArchivedMeanwhile(tmp_path / "daily")
    async with SignalBus(store, [DailyNoteReceptor(daily, zone=BERLIN)], retry=FAST_RETRY) as bus:
        assert await emit_and_settle(bus, note({"text": "Water."})) == {"daily": "delivered"}
    daily.archive(day)
    assert daily.read(day, archived=True) == ["Water.", "Water.", "Someone else's later line."]


@pytest.mark.asyncio
async def test_the_same_text_twice_from_two_signals_is_two_lines(
    store: Store, tmp_path: Path
) -> None:
    daily = DailyLog(tmp_path / "daily")
    async with SignalBus(store, [DailyNoteReceptor(daily, zone=BERLIN)]) as bus:
        for minutes in (0, 1):
            await emit_and_settle(
                bus, note({"text": "Water."}, emitted_at=T0 + timedelta(minutes=minutes))
            )
    assert daily.read(date(2026, 4, 11)) == ["Water.", "Water."]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"text": ""}, "text"),
        ({"text": "two\nlines"}, "text"),
        ({}, "text"),
        ({"text": "x", "date": "../../etc/passwd"}, "date"),
        ({"text": "x", "date": "2026-02-30"}, "date"),
        ({"text": "x", "date": "2026-4-1"}, "date"),
    ],
)
@pytest.mark.asyncio
async def test_contract_violations_are_dead_and_write_nothing(
    store: Store, tmp_path: Path, payload: dict[str, Any], field: str
) -> None:
    async with SignalBus(
        store, [DailyNoteReceptor(DailyLog(tmp_path / "daily"), zone=BERLIN)], retry=FAST_RETRY
    ) as bus:
        signal = note(payload)
        assert await emit_and_settle(bus, signal) == {"daily": "dead"}
    error = last_error(store, signal.id)
    assert error is not None and error.startswith(f"payload.{field}:")
    assert not any((tmp_path / "daily").glob("*.md")) if (tmp_path / "daily").exists() else True
