"""Hybrid ranking: a lexical ranking and a dense one, fused by reciprocal rank.

Reciprocal-rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009) scores a document by
``sum(weight / (k + rank))`` over the rankings that hold it (rank 1 is the best). It needs
no training and no common scale between BM25 scores and cosine similarities: only the
order within each ranking counts. ``k`` damps how much the very top positions dominate.

What a log line is embedded as (:func:`line_meanings`) lives here too: the daily layer
builds it whether or not the extra is installed.

This module is pure Python so that the layers can use it without the ``semantic`` extra.
The dense side has two seams: :class:`DenseRanker`, the stored vectors of the daily lines
and the marks (:mod:`daemon.services.dense_store`), which a background worker fills; and
:class:`DenseDocuments`, documents handed over by a layer that keeps them in memory (the
substrate's lines; :class:`daemon.search.semantic.DenseIndex`). Neither makes a search wait
for embedding: what is not embedded yet is found by the lexical ranking alone.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from datetime import date
from typing import Protocol, TypeVar

K = TypeVar("K", bound=Hashable)

# Cormack et al.'s constant; the layers use their own, measured ones below.
RRF_K = 60
# How the layers fuse, measured on the LoCoMo dev set (bench/locomo.py, chosen on half of
# its conversations): a small k trusts the top of each ranking, and the dense ranking
# counts for a bit less than the lexical.
FUSION_K = 10
DENSE_WEIGHT = 0.9
# How many dense neighbours a layer asks for before fusing: enough to reach past the
# lexical list's first pages, few enough that fusing stays cheap.
DENSE_CANDIDATES = 100


class DenseRanker(Protocol[K]):
    """Stored documents by key, ranked by meaning; those not embedded yet are not ranked."""

    def nearest(
        self, query: str, limit: int, *, since: date | None = None, scope: str | None = None
    ) -> dict[K, float]:
        """The ``limit`` embedded documents most similar to ``query``, mapped to their
        cosine similarity: with ``since``, only lines of days from it on; with ``scope``,
        only that workspace's marks."""


class DenseDocuments(Protocol[K]):
    """The dense half of an index a layer keeps in memory: documents by key."""

    def add(self, key: K, texts: Sequence[str]) -> None:
        """Index ``key`` as the mean meaning of ``texts``, embedded later (in the
        background)."""

    def remove(self, key: K) -> None:
        """Forget ``key``; unknown keys are ignored."""

    def nearest(self, query: str, limit: int) -> dict[K, float]:
        """The ``limit`` embedded documents most similar to ``query``, mapped to their
        cosine similarity."""


def ranking(scores: Mapping[K, float], tie_break: Callable[[K], object]) -> list[K]:
    """The keys of ``scores``, best score first; equal scores ordered by ``tie_break``."""
    return sorted(scores, key=lambda key: (-scores[key], tie_break(key)))


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[K]],
    *,
    weights: Sequence[float] | None = None,
    k: int = RRF_K,
) -> dict[K, float]:
    """The fused score of every key in any of ``rankings`` (each best first)."""
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    fused: dict[K, float] = {}
    for weight, ranked in zip(weights, rankings, strict=True):
        for rank, key in enumerate(ranked, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
    return fused


# "Anna: I've been practising my violin": a line said by someone (a capitalised name of
# one or two words), in the first person.
_SPEAKER = re.compile(r"^([A-Z][\w'-]*(?: [A-Z][\w'-]*)?): (.*)$")
# First-person words, and what follows the speaker's name in their place (English).
_FIRST_PERSON = (
    (re.compile(r"\bI'm\b"), " is"),
    (re.compile(r"\bI've\b"), " has"),
    (re.compile(r"\bI'd\b"), " would"),
    (re.compile(r"\bI'll\b"), " will"),
    (re.compile(r"\bI\b"), ""),
    (re.compile(r"\b[Mm]y\b"), "'s"),
    (re.compile(r"\b(?:me|myself)\b"), ""),
)


def speaker(line: str) -> str | None:
    """Who says ``line`` ("Anna: …"), if it names someone."""
    said = _SPEAKER.match(line)
    return None if said is None else said[1]


def said_of_speaker(line: str) -> str:
    """``line`` with its speaker's first person put in their name: "Anna: I'm learning
    my violin" becomes "Anna: Anna is learning Anna's violin". A question asks about Anna
    in the third person, and the embedding model can match a name, not "I" (on the LoCoMo
    dev set, dense recall@10 0.55 without this, 0.67 with it). Other lines are left as
    they are."""
    said = _SPEAKER.match(line)
    if said is None:
        return line
    speaker, text = said.groups()
    for pattern, suffix in _FIRST_PERSON:
        text = pattern.sub(speaker + suffix, text)  # a name holds no backslash
    return f"{speaker}: {text}"


def line_meanings(lines: Sequence[str]) -> list[tuple[str, str]]:
    """What each line of a log is embedded as: the line said of its speaker, and the same
    with the line before and after it. A line's meaning is the mean of both: an answer
    often only makes sense next to the question it answers (dense recall@10 on the LoCoMo
    dev set: 0.67 for the line, 0.53 for the window, 0.73 for their mean)."""
    said = [said_of_speaker(line) for line in lines]
    return [(said[n], "\n".join(said[max(n - 1, 0) : n + 2])) for n in range(len(said))]


def document_texts(meaning: Sequence[str]) -> tuple[str, ...]:
    """The texts of a document's meaning that are embedded: the ones not blank."""
    return tuple(text for text in meaning if text.strip())


def meaning_hash(texts: Sequence[str]) -> bytes:
    """The SHA-256 a document's vector is stored under: of its texts, in order (the same
    texts have the same vector, wherever they are)."""
    digest = hashlib.sha256()
    for text in texts:
        encoded = text.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "big"))
        digest.update(encoded)
    return digest.digest()
