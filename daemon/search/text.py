"""Text matching: the one way substrate, daily and compost decide what a query is about.

Text becomes *terms*: Unicode NFKC, casefolded, split on anything that is not a letter or a
digit (so the dots of a subject split it too: ``user.food.vegetables`` is three words), with
words shorter than three characters and common English stopwords dropped, then stemmed
(``vegetables`` and ``vegetable`` are one term). Terms match whole, never as substrings:
``sleep`` does not match ``sleepover``.

An :class:`Index` ranks small documents against a query with BM25, in memory: the marks
still queued for the index, and the lines of the few substrate files a search returns, for
their excerpts. The layers' documents themselves are ranked from the store's text index
(:mod:`daemon.search.index`), with the same terms and the same BM25.
"""

from __future__ import annotations

import heapq
import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Generic, TypeVar

import Stemmer

K = TypeVar("K", bound=Hashable)

MIN_WORD_LENGTH = 3

# BM25's usual constants: how quickly repeats of a term stop adding to the score, and how
# much a long document is discounted against the average length.
K1 = 1.2
B = 0.75

# Letters and digits of any script: word characters without the underscore.
_WORD = re.compile(r"[^\W_]+")

# Common English function words, including what a contraction leaves once its apostrophe
# splits it ("didn't" -> "didn"). Words under three characters never count, so they are
# not listed.
_STOPWORD_LIST = """
    about above after again against ain all and any are aren because been before being
    below between both but can could couldn did didn does doesn doing don down during each
    few for from further had hadn has hasn have haven having her here hers herself him
    himself his how into isn its itself just mightn more most mustn myself needn nor not
    now off once only other our ours ourselves out over own same shan she should shouldn
    some such than that the their theirs them themselves then there these they this those
    through too under until very was wasn were weren what when where which while who whom
    why will with won would wouldn you your yours yourself yourselves
"""
STOPWORDS = frozenset(_STOPWORD_LIST.split())

# PyStemmer: the Snowball English (Porter2) algorithm in C, small and fast.
_stemmer = Stemmer.Stemmer("english")
# A stemmer keeps its working state on the instance, so calls from worker threads
# must not interleave.
_stemmer_lock = threading.Lock()


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The stem of one already normalized word."""
    with _stemmer_lock:
        result: str = _stemmer.stemWord(word)
    return result


def words(text: str) -> list[str]:
    """The words of ``text`` that carry meaning: normalized, casefolded, stopwords dropped."""
    normalized = unicodedata.normalize("NFKC", text).casefold()
    return [
        word
        for word in _WORD.findall(normalized)
        if len(word) >= MIN_WORD_LENGTH and word not in STOPWORDS
    ]


def terms(text: str) -> list[str]:
    """The stemmed words of ``text``, repeats kept (they count towards term frequency)."""
    return [stem(word) for word in words(text)]


# A dotted subject path (user.food.lunch) asks for a subtree, not for words.
_SUBJECT_PATH = re.compile(r"^[^\s.]+(\.[^\s.]+)+$")


def is_free_text(query: str) -> bool:
    """Whether ``query`` is words rather than a dotted subject path."""
    return _SUBJECT_PATH.match(query.strip()) is None


def leaf_terms(query: str) -> list[str]:
    """For a dotted subject path, the terms of its last segment that has any
    (``user.food.lunch``: ``lunch``), which every line about its subtree holds, whether
    an observation's ``subject=`` or a note that mentions it; for free text, none. A
    path's upper segments are in every line under them (``user``: in every observation
    about the user), so a line holding those alone is not about the path."""
    if is_free_text(query):
        return []
    for segment in reversed(query.strip().split(".")):
        found = list(query_terms(segment))
        if found:
            return found
    return []


def query_terms(query: str) -> dict[str, str]:
    """Each distinct term of ``query``, mapped to the first word of the query that gave it,
    which is how a match is explained to a reader."""
    found: dict[str, str] = {}
    for word in words(query):
        found.setdefault(stem(word), word)
    return found


@dataclass(frozen=True, slots=True)
class Match(Generic[K]):
    """A document that matched: its key, its BM25 score, and the query words it contains
    (in query order)."""

    key: K
    score: float
    words: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Document:
    order: int  # insertion order: the stable tie-break between equal scores
    length: int
    counts: dict[str, int]


class Index(Generic[K]):
    """BM25 over a changing set of small documents, with postings for fast lookup.

    Not thread-safe: the layer that owns an index serialises access to it.
    """

    def __init__(self, *, b: float = B) -> None:
        self._b = b  # how much a long document is discounted (BM25's b)
        self._documents: dict[K, _Document] = {}
        self._postings: dict[str, dict[K, int]] = {}
        self._total_length = 0
        self._next_order = 0

    def add(self, key: K, text: str) -> None:
        """Index ``text`` under ``key``, replacing what was there. A text without terms is
        not indexed: it can never match and would only skew the length statistics."""
        self.remove(key)
        counts = Counter(terms(text))
        if not counts:
            return
        document = _Document(self._next_order, counts.total(), dict(counts))
        self._next_order += 1
        self._documents[key] = document
        self._total_length += document.length
        for term, count in counts.items():
            self._postings.setdefault(term, {})[key] = count

    def remove(self, key: K) -> None:
        """Forget ``key``; unknown keys are ignored."""
        document = self._documents.pop(key, None)
        if document is None:
            return
        self._total_length -= document.length
        for term in document.counts:
            posting = self._postings[term]
            del posting[key]
            if not posting:
                del self._postings[term]

    def scores(self, query: str, *, among: Sequence[K] | None = None) -> dict[K, float]:
        """The score of every document holding a query term (of those ``among``, if given:
        the lines of the few files a search shows, rather than every posting of the query's
        terms). Term statistics cover the whole index, so ``among`` narrows the results
        without changing how rare a word is considered."""
        count = len(self._documents)
        if count == 0:
            return {}
        average_length = self._total_length / count
        documents = self._documents
        b = self._b
        scores: dict[K, float] = {}
        for term in query_terms(query):
            posting = self._postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (count - len(posting) + 0.5) / (len(posting) + 0.5))
            held = (
                posting.items()
                if among is None
                else [(key, tf) for key in among if (tf := posting.get(key))]
            )
            for key, tf in held:
                norm = K1 * (1 - b + b * documents[key].length / average_length)
                scores[key] = scores.get(key, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
        return scores

    def words(self, key: K, query: str) -> tuple[str, ...]:
        """The words of ``query`` that the document ``key`` holds, in query order (none for
        a document not in the index)."""
        document = self._documents.get(key)
        if document is None:
            return ()
        counts = document.counts
        return tuple(word for term, word in query_terms(query).items() if term in counts)

    def search(self, query: str, limit: int) -> list[Match[K]]:
        """The ``limit`` best matches, most relevant first; equal scores keep index order."""
        scores = self.scores(query)
        best = heapq.nsmallest(
            limit, scores, key=lambda key: (-scores[key], self._documents[key].order)
        )
        return [Match(key, scores[key], self.words(key, query)) for key in best]
