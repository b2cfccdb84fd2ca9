"""The daily layer's search: ranked hits over the lines of the daily files.

The lines are rows of the text index (:class:`~daemon.search.index.TextIndex`), which the
daily layer (:class:`daemon.files.daily.DailyLog`) keeps in step with its files. A search
asks the index for the best candidate lines and ranks those alone: each by its own BM25
score plus a share of its neighbours', fused with the lines' ranking by meaning (with a
dense ranker), with the lines of a speaker or a day the query names, and joins the best
adjacent lines into hits.

A line is known by its day, whether it is numbered as the archive numbers it (archived,
or claimed by a consolidation: a claim's lines become those archive lines), and its
number.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date

from daemon.core.lines import lines_between
from daemon.core.text_rows import DAILY, LIVE, Candidate
from daemon.search.fusion import (
    DENSE_CANDIDATES,
    DENSE_WEIGHT,
    FUSION_K,
    DenseRanker,
    ranking,
    reciprocal_rank_fusion,
    speaker,
)
from daemon.search.index import TextIndex, bm25, selective
from daemon.search.text import leaf_terms, query_terms

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
    # Numbered as the archive numbers the day (its archive and claim), or as its live file:
    # a day archived and then noted again has both, each from line 1.
    archived: bool


def joined(
    hits: Sequence[DailyHit], lines: Callable[[DailyHit, tuple[int, int]], DailyHit | None]
) -> list[DailyHit]:
    """Each of a file's lines shown once: a hit sharing lines with hits before it in the same
    file (a mark's cited line inside a search's window, say) joins them where the first
    stood, its lines read again by ``lines`` (the hit's day and file, the joined range)."""
    kept: list[DailyHit] = []
    for hit in hits:
        start, end = hit.line_range
        shared = [
            k
            for k in kept
            if (k.date, k.archived) == (hit.date, hit.archived)
            and k.line_range[0] <= end
            and start <= k.line_range[1]
        ]
        if not shared:
            kept.append(hit)
            continue
        span = (
            min(start, *(k.line_range[0] for k in shared)),
            max(end, *(k.line_range[1] for k in shared)),
        )
        at = kept.index(shared[0])
        kept[at] = shared[0] if span == shared[0].line_range else lines(hit, span) or shared[0]
        kept = [k for k in kept if k not in shared[1:]]
    return kept


# Where a line lives: its day, whether it is numbered as the archive numbers it, and its
# 1-indexed line number.
LineKey = tuple[date, bool, int]
# The bytes of a day's live file (False) or of its archive and claim, in archive order,
# which :func:`~daemon.core.lines.lines_between` numbers as the index does.
LineSource = Callable[[date, bool], bytes]

# How many candidate lines the index is asked for, chosen by the query's terms that no more
# lines than this hold (:func:`~daemon.search.index.selective`): on a corpus like LoCoMo's
# conversations (400-700 lines) every line holding a query term; on years of notes, the
# lines holding its rarer terms.
CANDIDATES = 2000


class DailyIndex:
    """The daily lines of a :class:`~daemon.search.index.TextIndex`, ranked against a
    query, with their stored vectors when there is a dense ranker (the daemon's worker
    embeds the lines; those not embedded yet are ranked lexically); ``lines`` reads a
    file's lines for excerpts."""

    def __init__(
        self, index: TextIndex, lines: LineSource, dense: DenseRanker[LineKey] | None = None
    ) -> None:
        self.index = index
        self._read_lines = lines
        self.dense = dense

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
        files: dict[tuple[date, bool], bytes] = {}

        def lines(day: date, archived: bool) -> bytes:
            if (day, archived) not in files:
                files[(day, archived)] = self._read_lines(day, archived)
            return files[(day, archived)]

        scores = self._scores(query, since, lines)
        # Best first; on equal scores the newer day, then the earlier line.
        candidates = [(-score, *_line_order(key), key) for key, score in scores.items()]
        # Only as many lines as the hits need are taken: pop them in order from a heap
        # rather than sorting every matching line.
        heapq.heapify(candidates)
        ranked = (heapq.heappop(candidates)[-1] for _ in range(len(candidates)))
        hits = []
        for span in _spans(ranked, limit):
            shown = lines_between(lines(span.day, span.archived), span.start, span.end)
            hits.append(
                DailyHit(
                    span.day.isoformat(),
                    "\n".join(shown or ()),
                    (span.start, span.end),
                    span.archived,
                )
            )
        return hits

    def _scores(self, query: str, since: date | None, lines: LineSource) -> dict[LineKey, float]:
        """Every candidate line's score: the rankings described in :meth:`search`, fused."""
        wanted = list(query_terms(query))
        statistics = self.index.statistics(DAILY, wanted)
        # A subject path's lines hold its last segment (see leaf_terms): those choose, and
        # a line without them all is not about the path.
        leaf = leaf_terms(query)
        choosing = selective(leaf or wanted, statistics, CANDIDATES)
        found = (
            self.index.candidates(
                DAILY, choosing, CANDIDATES, since=None if since is None else since.isoformat()
            )
            if choosing
            else []
        )
        if leaf:
            found = [c for c in found if set(leaf).issubset(c.terms.split())]
        speakers = {_key(c): c.speaker for c in found}
        if found:
            raw = bm25(found, wanted, statistics, LINE_B)
            scores = _with_neighbours(dict(zip(speakers, raw, strict=True)))
        else:
            scores = {}
        rankings: list[list[LineKey]] = [ranking(scores, _line_order)]
        weights = [1.0]

        def fuse(ranked: list[LineKey], weight: float) -> dict[LineKey, float]:
            rankings.append(ranked)
            weights.append(weight)
            return reciprocal_rank_fusion(rankings, weights=weights, k=FUSION_K)

        if self.dense is not None:
            similar = self.dense.nearest(query, DENSE_CANDIDATES, since=since)
            # Nothing in the horizon embedded yet (the worker embeds the marks first): fused
            # with nothing, the lexical ranking keeps its order, so it is not sorted again.
            if similar:
                scores = fuse(ranking(similar, _line_order), DENSE_WEIGHT)
        named = _named(query, {name for name in speakers.values() if name})
        if named:
            said = {
                key: score for key, score in scores.items() if _said(key, speakers, lines) in named
            }
            scores = fuse(ranking(said, _line_order), NAMED_SPEAKER_WEIGHT)
        days = {day for day in named_days(query) if since is None or day >= since}
        if days:
            on_days = {
                key: scores.get(key, 0.0)
                for source, state, part in self.index.parts(DAILY, [d.isoformat() for d in days])
                for key in [(date.fromisoformat(source), state != LIVE, part)]
            }
            scores = fuse(ranking(on_days, _line_order), NAMED_DAY_WEIGHT)
        return scores


def _key(candidate: Candidate) -> LineKey:
    return date.fromisoformat(candidate.source), candidate.state != LIVE, candidate.part


def _said(key: LineKey, speakers: dict[LineKey, str | None], lines: LineSource) -> str | None:
    """Who says the line (casefolded): known for a candidate, else read from its file."""
    if key in speakers:
        return speakers[key]
    day, archived, number = key
    held = lines_between(lines(day, archived), number, number)
    name = None if held is None else speaker(held[0])
    return None if name is None else name.casefold()


def _named(query: str, speakers: set[str]) -> set[str]:
    """The speakers among ``speakers`` that ``query`` names (as whole words, any case)."""
    folded = query.casefold()
    return {
        name for name in speakers if name in folded and re.search(rf"\b{re.escape(name)}\b", folded)
    }


def named_days(query: str) -> set[date]:
    """The calendar days ``query`` names, in English or ISO form."""
    found = [(year, month, day) for day, month, year in _DAY_MONTH_YEAR.findall(query)]
    found += [(year, month, day) for month, day, year in _MONTH_DAY_YEAR.findall(query)]
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
