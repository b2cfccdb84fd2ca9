"""Recall shows each line of a day's file once: hits that share lines are joined."""

from __future__ import annotations

from daemon.search.daily import DailyHit, joined

LINES = ["woke up", "lunch with Bea", "OBS likes ramen", "ramen again", "went for a run"]


def hit(start: int, end: int, archived: bool = True) -> DailyHit:
    return DailyHit("2026-04-10", "\n".join(LINES[start - 1 : end]), (start, end), archived)


def read(found: DailyHit, span: tuple[int, int]) -> DailyHit:
    return hit(*span, archived=found.archived)


def test_hits_sharing_lines_of_one_file_join_where_the_first_stood() -> None:
    cited, window, bridge = hit(4, 4), hit(1, 2), hit(2, 4)
    live = hit(1, 2, archived=False)  # the same numbers in the day's other file
    assert joined([cited, window, live, bridge], read) == [hit(1, 4), live]


def test_hits_apart_or_the_same_stay_as_they_are() -> None:
    assert joined([hit(1, 1), hit(3, 3), hit(3, 3)], read) == [hit(1, 1), hit(3, 3)]
