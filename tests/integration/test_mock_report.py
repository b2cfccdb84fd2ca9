"""The mock extractor says what it passed over: a day of ordinary sentences consolidates into
no marks, and the log line and ``cambium memory consolidate`` say why instead of nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog
from support import emit_and_settle
from test_consolidation import DAY, LOG, all_marks, clock, consolidate, receptor, write_day

from daemon.bus import SignalBus
from daemon.files.daily import DailyLog
from daemon.store import Store
from daemon.testing import DaemonHome, running

SENTENCES = ["Lunch with Arnold, he is moving to Lisbon.", "", "Slept badly again."]


async def consolidated_log(store: Store, tmp_path: Path, lines: list[str]) -> dict[str, object]:
    daily = DailyLog(tmp_path / "daily")
    write_day(tmp_path / "daily", DAY, lines)
    with structlog.testing.capture_logs() as logs:
        async with SignalBus(store, [receptor(store, daily)], clock=clock) as bus:
            await emit_and_settle(bus, consolidate({"date": DAY.isoformat()}))
    [line] = [e for e in logs if e["event"] == "consolidated"]
    return line


@pytest.mark.asyncio
async def test_a_day_of_sentences_says_how_many_lines_the_mock_could_read(
    store: Store, tmp_path: Path
) -> None:
    line = await consolidated_log(store, tmp_path, SENTENCES)
    assert line["marks"] == 0 and all_marks(store) == []
    assert line["note"] == (
        "2 lines, 0 in the `OBS subject=` form the mock extractor reads; configure [llm] and "
        '[consolidation] extractor = "openai" to extract from natural text'
    )


@pytest.mark.asyncio
async def test_a_mixed_day_counts_its_obs_lines(store: Store, tmp_path: Path) -> None:
    line = await consolidated_log(store, tmp_path, LOG)
    assert str(line["note"]).startswith("6 lines, 3 in the `OBS subject=` form")


@pytest.mark.asyncio
async def test_a_day_all_in_the_obs_form_has_no_note(store: Store, tmp_path: Path) -> None:
    line = await consolidated_log(store, tmp_path, [LOG[1], LOG[3]])
    assert "note" not in line


@pytest.mark.subprocess
def test_consolidate_says_why_a_day_of_sentences_made_no_marks(tmp_path: Path) -> None:
    home = DaemonHome(tmp_path)
    with running(home):
        for text in ("long walk by the river", "called mum"):
            assert home.cli("memory", "note", text, "--date", "2026-01-15").returncode == 0
        result = home.cli("memory", "consolidate", "--date", "2026-01-15")
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[1:] == [
            "2 lines, none in the `OBS subject=<path> <text>` form the mock extractor reads, "
            'so no marks: configure [llm] and set [consolidation] extractor = "openai" to '
            "extract from natural text"
        ]
        assert (
            home.cli(
                "memory", "note", "OBS subject=user.walks by the river", "--date", "2026-01-16"
            ).returncode
            == 0
        )
        marked = home.cli("memory", "consolidate", "--date", "2026-01-16")
        assert len(marked.stdout.splitlines()) == 1, "a day that made a mark needs no word"
