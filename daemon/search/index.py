"""The persistent text index's seam: what a layer keeps in it and asks of it.

A layer's texts are kept as *rows* of pre-stemmed terms (:func:`row_of`: the very terms
:mod:`daemon.search.text` ranks with, space-separated), in *groups*: the lines of one daily
file (a day's live, claimed or archived lines), one mark, one substrate file (a row, its
whole text) or the learnings of one compost file. A group is written whole or by the rows
that changed, found by each row's digest; a file's group also keeps the file's
:class:`Signature`, so a start re-reads only the files that changed.

The index answers with *candidates*, the best rows for a query's terms by the engine's own
ranking (FTS5's bm25, PostgreSQL's ``ts_rank``), and with the layer's statistics (how many
rows hold terms, their total length, how many hold each term), from which the layer
computes its own BM25 over the candidates alone (:func:`bm25`).

:class:`TextIndex` is implemented in the store (``daemon.store.text_index``, SQLite and
PostgreSQL) and, for the layers' tests, in memory
(:class:`daemon.search.memory_index.MemoryTextIndex`).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

from daemon.core.text_rows import Candidate, Group, Row, Signature, Statistics
from daemon.search.fusion import speaker
from daemon.search.text import K1, terms


class TextIndex(Protocol):
    """The rows of every layer (see the module's docstring). Each method is one
    transaction."""

    @property
    def writable(self) -> bool:
        """Whether this process may write the index (not a store opened to read)."""

    def digests(self, group: Group) -> dict[int, int]:
        """part -> digest of the group's rows."""

    def signatures(self, layer: str) -> dict[tuple[str, str], Signature]:
        """(source, state) -> the signature of every group of ``layer`` that has one."""

    def write(
        self,
        group: Group,
        rows: Sequence[Row],
        removed: Sequence[int],
        signature: Signature | None,
    ) -> None:
        """Put ``rows`` (replacing rows at the same parts), delete the parts ``removed``,
        and keep ``signature`` for the group (``None``: none)."""

    def move(self, source: Group, target: Group, shift: int) -> None:
        """Every row of ``source`` into ``target``, its part plus ``shift``, replacing what
        ``target`` held at those parts; ``source`` keeps no signature."""

    def drop(self, group: Group) -> None:
        """Delete the group's rows and signature."""

    def candidates(
        self,
        layer: str,
        wanted: Sequence[str],
        limit: int,
        *,
        scope: str | None = None,
        since: str | None = None,
    ) -> list[Candidate]:
        """The ``limit`` best rows holding any of the terms ``wanted``, best first; with
        ``scope``, only that scope's; with ``since``, only sources from it on (days)."""

    def statistics(self, layer: str, wanted: Sequence[str]) -> Statistics: ...

    def parts(self, layer: str, sources: Sequence[str]) -> list[tuple[str, str, int]]:
        """(source, state, part) of every row of these sources (days)."""


def digest_of(text: str) -> int:
    """A row's digest of its text: 64 bits, signed (a BIGINT on every engine)."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def row_of(part: int, text: str, indexed: str | None = None) -> Row:
    """The row that indexes ``text`` at ``part``; its terms are those of ``indexed`` when
    given (a mark's subject and observation), else of ``text``."""
    found = terms(text if indexed is None else indexed)
    name = speaker(text)
    return Row(
        part,
        " ".join(found),
        len(found),
        digest_of(text),
        None if name is None else name.casefold(),
    )


def selective(wanted: Sequence[str], statistics: Statistics, most: int) -> list[str]:
    """The terms of ``wanted`` that choose the candidates: those held by at most ``most``
    rows (a term held by none is dropped).

    The engine ranks every row holding any term it is asked for before it keeps the best,
    so a term held by more rows than the candidates asked for would cost work that grows
    with the layer (years of notes: "Caroline" in every line she says) while it can only
    fill the list with rows the rarer terms outrank. Such terms still count in the BM25
    over the candidates. When every term is that common, the rarest one chooses."""
    held = {term: n for term in wanted if (n := statistics.frequencies.get(term, 0)) > 0}
    kept = [term for term, n in held.items() if n <= most]
    if kept or not held:
        return kept
    return [min(held, key=held.__getitem__)]


def bm25(
    candidates: Sequence[Candidate], wanted: Sequence[str], statistics: Statistics, b: float
) -> list[float]:
    """Each candidate's BM25 score for the terms ``wanted``, with the layer's statistics
    (the same formula as :class:`daemon.search.text.Index`)."""
    if statistics.documents == 0:
        return [0.0 for _ in candidates]
    average = statistics.total_length / statistics.documents
    idf = {
        term: math.log(1 + (statistics.documents - n + 0.5) / (n + 0.5))
        for term in wanted
        if (n := statistics.frequencies.get(term, 0)) > 0
    }
    scores = []
    for candidate in candidates:
        count = (
            _counts(candidate.terms).__getitem__
            if candidate.length > LONG_ROW
            else candidate.terms.split().count
        )
        norm = K1 * (1 - b + b * candidate.length / average)
        score = 0.0
        for term, weight in idf.items():
            tf = count(term)
            if tf:
                score += weight * tf * (K1 + 1) / (tf + norm)
        scores.append(score)
    return scores


# A row longer than this (a substrate file's whole text, a compost file's learnings: most
# queries find most of a substrate) has its term counts kept for the next query, rather
# than split and counted again: 100 files of 580 terms cost 5-7 ms a query to count.
LONG_ROW = 64


@lru_cache(maxsize=256)
def _counts(terms: str) -> Counter[str]:
    return Counter(terms.split())


def drop_cached_counts() -> None:
    """Forget the term counts of every row remembered here (a forget erases every copy)."""
    _counts.cache_clear()
