"""A day's files as Loom shows them: the live file and the archive, and the lines a mark's
evidence cites in them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from daemon.core.days import InvalidDay, parse_day
from daemon.files.daily import SUFFIX, DailyLog
from daemon.search.daily import DailyHit


@dataclass(frozen=True)
class DayPage:
    archived: bool
    lines: list[str]
    anchor: str  # "L" for the live file, "A" for the archived one


def day_lists(daily: DailyLog) -> tuple[list[date], list[date]]:
    return daily.days(archived=False), daily.days(archived=True)


def day_files(daily: DailyLog, day: date) -> list[DayPage]:
    """The day's archive first (evidence is looked up there first, see
    :meth:`DailyLog.evidence`), then its live file."""
    files = []
    for archived, anchor in ((True, "A"), (False, "L")):
        lines = daily.read(day, archived=archived)
        if lines is not None:
            files.append(DayPage(archived, lines, anchor))
    return files


def locate(files: list[DayPage], line_range: tuple[int, int]) -> DayPage | None:
    """The file cited lines are in, found as :meth:`DailyLog.evidence` finds them."""
    start, end = line_range
    return next((f for f in files if 1 <= start <= end <= len(f.lines)), None)


@dataclass(frozen=True)
class EvidenceLines:
    day: str
    line_range: tuple[int, int]
    lines: list[str] | None  # None: the file no longer holds those lines
    anchor: str


def evidence_lines(daily: DailyLog, evidence: dict[str, Any]) -> EvidenceLines | None:
    daily_file, line_range = evidence.get("daily_file"), evidence.get("line_range")
    if not isinstance(daily_file, str) or not line_range:
        return None
    try:
        day = parse_day(daily_file.removesuffix(SUFFIX))
    except InvalidDay:
        return None
    span = (int(line_range[0]), int(line_range[1]))
    located = locate(day_files(daily, day), span)
    if located is None:
        return EvidenceLines(day.isoformat(), span, None, "L")
    lines = located.lines[span[0] - 1 : span[1]]
    return EvidenceLines(day.isoformat(), span, lines, located.anchor)


def anchor_of(hit: DailyHit) -> str:
    """The anchor of the day page's row that shows a recalled excerpt's first line
    (``A2`` in the archive, ``L2`` in the live file)."""
    return f"{'A' if hit.archived else 'L'}{hit.line_range[0]}"
