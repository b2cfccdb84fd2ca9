"""Hybrid ranking: a lexical ranking and a dense one, fused by reciprocal rank.

Reciprocal-rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009) scores a document by
``sum(weight / (k + rank))`` over the rankings that hold it (rank 1 is the best). It needs
no training and no common scale between BM25 scores and cosine similarities: only the
order within each ranking counts. ``k`` damps how much the very top positions dominate.

This module is pure Python so that the layers can use it without the ``semantic`` extra;
the dense side (:class:`DenseRanker`) is implemented in :mod:`daemon.files.semantic`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Protocol, TypeVar

from daemon.files.text import B, Index

K = TypeVar("K", bound=Hashable)

# Cormack et al.'s constant; the layers use their own, measured ones below.
RRF_K = 60
# How the layers fuse, measured on the LoCoMo dev set (bench/locomo.py): a small k trusts
# the top of each ranking, and the dense ranking counts for a bit less than the lexical.
FUSION_K = 10
DENSE_WEIGHT = 0.7
# How many dense neighbours a layer asks for before fusing: enough to reach past the
# lexical list's first pages, few enough that fusing stays cheap.
DENSE_CANDIDATES = 100


class DenseRanker(Protocol[K]):
    """The dense half of a layer's index: documents by key, ranked by meaning."""

    def add(self, key: K, text: str) -> None:
        """Index ``text`` under ``key`` (its embedding may be computed later, in a batch)."""

    def remove(self, key: K) -> None:
        """Forget ``key``; unknown keys are ignored."""

    def flush(self) -> None:
        """Embed what was added and not embedded yet (:meth:`nearest` does it anyway)."""

    def nearest(
        self, query: str, limit: int, *, where: Callable[[K], bool] | None = None
    ) -> dict[K, float]:
        """The ``limit`` documents most similar to ``query`` (accepted by ``where``),
        mapped to their cosine similarity."""


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


class HybridIndex(Index[K]):
    """A lexical :class:`~daemon.files.text.Index` that also feeds every document it is
    given to a dense ranker, when there is one, so that a layer keeps both current with
    the same calls."""

    def __init__(self, dense: DenseRanker[K] | None = None, *, b: float = B) -> None:
        super().__init__(b=b)
        self.dense = dense

    def add(self, key: K, text: str) -> None:
        super().add(key, text)
        if self.dense is not None:
            self.dense.add(key, text)

    def remove(self, key: K) -> None:
        super().remove(key)
        if self.dense is not None:
            self.dense.remove(key)
