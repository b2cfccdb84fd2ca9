"""The daily files' rows in the text index, kept in step with the files.

Every file of a day is a group of rows (:class:`~daemon.search.index.Group`): the live file
(``live``), a claim a consolidation holds (``claimed``) and the archive (``archived``). A
claim's lines are numbered as the archive will number them, so when the claim is merged its
rows only change state, and while it is held the day's lines are each indexed once: the
archive's (up to a merge's recorded size), the claim's, the live file's.

A group is kept in step with its file as every layer's files are
(:class:`~daemon.files.file_rows.FileRows`: by each line's digest, with the file's
signature), so a start with an up-to-date index reads no unchanged file.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

from daemon.core.text_rows import ARCHIVED, CLAIMED, DAILY, LIVE, Group
from daemon.files.file_rows import FileRows
from daemon.search.index import TextIndex


def group(day: date, state: str) -> Group:
    return Group(DAILY, day.isoformat(), state)


class DailyRows(FileRows):
    """The daily layer's groups in ``index``: a file's lines are its texts, numbered from
    1 after the lines before it (a claim's, after the archive's). The caller serialises
    calls per day."""

    def __init__(self, index: TextIndex, split: Callable[[bytes], list[str]]) -> None:
        super().__init__(
            index, DAILY, lambda _, data, offset: list(enumerate(split(data), start=offset + 1))
        )

    def claimed(self, day: date, offset: int) -> None:
        """The live file became a claim: its rows are the claim's, numbered after the
        archive's ``offset`` lines."""
        self.index.move(group(day, LIVE), group(day, CLAIMED), offset)
        self.forget(day.isoformat(), LIVE)

    def merged(self, day: date) -> None:
        """The claim is in the archive now: its rows are archived rows."""
        self.index.move(group(day, CLAIMED), group(day, ARCHIVED), 0)
        self.forget(day.isoformat(), CLAIMED)
