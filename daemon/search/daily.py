"""The daily layer's search: ranked hits over the lines of the daily files.

The daily layer (:class:`daemon.files.daily.DailyLog`) reads its files and hands each
file's lines to a :class:`DailyIndex` whenever they change (:meth:`DailyIndex.replace`);
the index ranks lines against a query, each by its own BM25 score plus a share of its
neighbours', fused with the lines' ranking by meaning (with a dense ranker), with the lines
of a speaker or a day the query names, and joins the best adjacent lines into hits.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

from daemon.search.fusion import (
    DENSE_CANDIDATES,
    DENSE_WEIGHT,
    FUSION_K,
    DenseRanker,
    HybridIndex,
    line_meanings,
    ranking,
    reciprocal_rank_fusion,
    speaker,
)

# In ranking, a line borrows this share of its neighbours' scores: in a log, the line that
# answers something often sits next to the line that names it.
NEIGHBOUR_WEIGHT = 0.4
# BM25's length discount for lines, lower than for documents: a line that says more is not
# less about each thing it says. Both measured on the LoCoMo dev set (bench/locomo.py):
# recall@10 0.749 with 0.3 and the usual 0.75, 0.780 with these.
LINE_B = 0.4
# A query that names someone who speaks in the log ("What did Anna paint?" and "Anna: …"
# lines) also ranks the lines they said, in the order of the rest, fused at this weight; a
# query that names a day ("on 3 June, 2023") likewise ranks that day's lines. Measured on
# the LoCoMo dev set, chosen on half of its conversations: the speaker's ranking adds about
# 0.05 to hybrid recall@5; 41 of 760 questions name a day, 36 of them their answer's day.
NAMED_SPEAKER_WEIGHT = 1.5
NAMED_DAY_WEIGHT = 1.0

_MONTHS = {
    name.casefold(): number
    for number, names in enumerate(
        (
            ("January", "Jan"),
            ("February", "Feb"),
            ("March", "Mar"),
            ("April", "Apr"),
            ("May",),
            ("June", "Jun"),
            ("July", "Jul"),
            ("August", "Aug"),
            ("September", "Sep", "Sept"),
            ("October", "Oct"),
            ("November", "Nov"),
            ("December", "Dec"),
        ),
        start=1,
    )
    for name in names
}
_ORDINAL = r"(\d{1,2})(?:st|nd|rd|th)?"
# "3 June 2023", "3rd of June, 2023"; "June 3, 2023"; "2023-06-03".
_DAY_MONTH_YEAR = re.compile(rf"\b{_ORDINAL}(?: of)? ([A-Za-z]+)\.?,? (\d{{4}})\b")
_MONTH_DAY_YEAR = re.compile(rf"\b([A-Za-z]+)\.? {_ORDINAL},? (\d{{4}})\b")
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


@dataclass(frozen=True, slots=True)
class DailyHit:
    date: str  # YYYY-MM-DD
    excerpt: str
    line_range: tuple[int, int]  # 1-indexed, inclusive


# Where a line lives: its day, whether it is archived, and its 1-indexed line number.
LineKey = tuple[date, bool, int]


class DailyIndex:
    """The lines of every daily file, live and archived, ranked against a query. Not
    thread-safe: the daily layer serialises access to it."""

    def __init__(self, dense: DenseRanker[LineKey] | None = None) -> None:
        self._lines: dict[tuple[date, bool], tuple[str, ...]] = {}
        self._index: HybridIndex[LineKey] = HybridIndex(dense, b=LINE_B)
        self._said_by: dict[str, set[LineKey]] = {}  # casefolded speaker -> their lines

    def flush(self) -> None:
        """Embed (with a dense ranker) the lines added since the last search, now."""
        if self._index.dense is not None:
            self._index.dense.flush()

    def search(self, query: str, *, since: date | None, limit: int) -> list[DailyHit]:
        """Ranked hits for ``query`` over the files of the days from ``since`` on
        (``None``: all of them), most relevant first.

        Lines are ranked, each by its own score plus a share of its matching neighbours'.
        With a dense ranker, that ranking is fused with the lines' ranking by meaning; a
        query naming a speaker of the log or a day adds their lines, in the order of the
        rankings before (see ``NAMED_SPEAKER_WEIGHT``). The best lines are taken until
        ``limit`` hits are filled; taken lines adjacent in a file form one hit, ranked by
        its best line.
        """
        scores = self._scores(query, since)
        # Best first; on equal scores the newer day, then the earlier line.
        candidates = [(-score, *_line_order(key), key) for key, score in scores.items()]
        # Only as many lines as the hits need are taken: pop them in order from a heap
        # rather than sorting every matching line.
        heapq.heapify(candidates)
        ranked = (heapq.heappop(candidates)[-1] for _ in range(len(candidates)))
        return [
            DailyHit(
                span.day.isoformat(),
                "\n".join(self._lines[(span.day, span.archived)][span.start - 1 : span.end]),
                (span.start, span.end),
            )
            for span in _spans(ranked, limit)
        ]

    def _scores(self, query: str, since: date | None) -> dict[LineKey, float]:
        """Every candidate line's score: the rankings described in :meth:`search`, fused."""

        def wanted(key: LineKey) -> bool:
            return since is None or key[0] >= since

        where = None if since is None else wanted
        scores = _with_neighbours(self._index.scores(query, where=where))
        rankings: list[list[LineKey]] = [ranking(scores, _line_order)]
        weights = [1.0]

        def fuse(ranked: list[LineKey], weight: float) -> dict[LineKey, float]:
            rankings.append(ranked)
            weights.append(weight)
            return reciprocal_rank_fusion(rankings, weights=weights, k=FUSION_K)

        if self._index.dense is not None:
            similar = self._index.dense.nearest(query, DENSE_CANDIDATES, where=where)
            scores = fuse(ranking(similar, _line_order), DENSE_WEIGHT)
        named = self._named_speakers(query)
        if named:
            said = {
                key: scores[key] for name in named for key in self._said_by[name] & scores.keys()
            }
            scores = fuse(ranking(said, _line_order), NAMED_SPEAKER_WEIGHT)
        days = {day for day in named_days(query) if since is None or day >= since}
        if days:
            on_days = {
                (day, archived, number): scores.get((day, archived, number), 0.0)
                for (day, archived), lines in self._lines.items()
                if day in days
                for number in range(1, len(lines) + 1)
            }
            scores = fuse(ranking(on_days, _line_order), NAMED_DAY_WEIGHT)
        return scores

    def _named_speakers(self, query: str) -> list[str]:
        """The speakers of the log that ``query`` names (as whole words, any case)."""
        folded = query.casefold()
        return [
            name
            for name in self._said_by
            if name in folded and re.search(rf"\b{re.escape(name)}\b", folded)
        ]

    def replace(self, day: date, archived: bool, lines: tuple[str, ...] | None) -> None:
        """Index the file's ``lines`` in place of what it held before (``None``: the file
        is gone)."""
        previous = self._lines.pop((day, archived), None)
        if previous is not None:
            for number, line in enumerate(previous, start=1):
                self._index.remove((day, archived, number))
                self._said(line, (day, archived, number), add=False)
        if lines is not None:
            self._lines[(day, archived)] = lines
            meanings = line_meanings(lines) if self._index.dense is not None else None
            for number, line in enumerate(lines, start=1):
                self._index.add(
                    (day, archived, number),
                    line,
                    None if meanings is None else meanings[number - 1],
                )
                self._said(line, (day, archived, number), add=True)

    def _said(self, line: str, key: LineKey, *, add: bool) -> None:
        """Keep ``_said_by`` in step with the index."""
        name = speaker(line)
        if name is None:
            return
        folded = name.casefold()
        if add:
            self._said_by.setdefault(folded, set()).add(key)
            return
        lines = self._said_by.get(folded, set())
        lines.discard(key)
        if not lines:
            self._said_by.pop(folded, None)


def named_days(query: str) -> set[date]:
    """The calendar days ``query`` names, in English or ISO form."""
    found = set()
    for day, month, year in _DAY_MONTH_YEAR.findall(query):
        found.add((year, month, day))
    for month, day, year in _MONTH_DAY_YEAR.findall(query):
        found.add((year, month, day))
    days = set()
    for year, month, day in found:
        number = _MONTHS.get(month.casefold())
        if number is not None:
            try:
                days.add(date(int(year), number, int(day)))
            except ValueError:
                continue  # "31 June"
    for year, month, day in _ISO_DAY.findall(query):
        try:
            days.add(date(int(year), int(month), int(day)))
        except ValueError:
            continue
    return days


def _with_neighbours(raw: dict[LineKey, float]) -> dict[LineKey, float]:
    """Each line's score plus a share of its neighbours' (see ``NEIGHBOUR_WEIGHT``)."""
    scores = {}
    for key, score in raw.items():
        day, archived, number = key
        neighbours = raw.get((day, archived, number - 1), 0.0) + raw.get(
            (day, archived, number + 1), 0.0
        )
        scores[key] = score + NEIGHBOUR_WEIGHT * neighbours
    return scores


def _line_order(key: LineKey) -> tuple[int, int]:
    """Between equal scores: the newer day first, then the earlier line."""
    day, _, number = key
    return -day.toordinal(), number


@dataclass(slots=True)
class _Span:
    """Adjacent taken lines of one file; ``rank`` is that of its best line."""

    day: date
    archived: bool
    start: int
    end: int
    rank: int


def _spans(ranked: Iterable[LineKey], limit: int) -> list[_Span]:
    """Take lines in rank order until one more would open hit number ``limit + 1``;
    adjacent taken lines join one span. The spans, best first."""
    by_end: dict[LineKey, _Span] = {}
    by_start: dict[LineKey, _Span] = {}
    count = 0
    for rank, (day, archived, number) in enumerate(ranked):
        left = by_end.pop((day, archived, number - 1), None)
        right = by_start.pop((day, archived, number + 1), None)
        if left is not None and right is not None:
            # The line bridges two spans: they become one.
            left.end, left.rank = right.end, min(left.rank, right.rank)
            span = left
            count -= 1
        elif left is not None:
            left.end = number
            span = left
        elif right is not None:
            right.start = number
            span = right
        elif count >= limit:
            break
        else:
            span = _Span(day, archived, number, number, rank)
            count += 1
        by_start[(day, archived, span.start)] = span
        by_end[(day, archived, span.end)] = span
    return sorted(by_start.values(), key=lambda span: span.rank)
