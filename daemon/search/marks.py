"""The marks' free-text search: what a query asks of the text index, and the dense side.

A mark is indexed as one row whose terms are its subject's segments and its observation's
words together (``people.arnold.plans`` / "moving to Lisbon" is found by ``arnold`` and by
``lisbon``). A dotted subject path asks for a subtree, not for words: it finds nothing here
(:func:`is_free_text`). With a dense ranker, every observation is also embedded
(:class:`MarkMeanings`) and the lexical and dense rankings are fused as in the daily
layer. What is indexed is decided by its owner (:class:`daemon.services.mark_search.MarkSearch`).
"""

from __future__ import annotations

import re
from collections.abc import KeysView

from daemon.search.fusion import (
    DENSE_WEIGHT,
    FUSION_K,
    DenseRanker,
    ranking,
    reciprocal_rank_fusion,
)
from daemon.search.text import query_terms

# At most this many text hits go on to be scored by strength.
MAX_HITS = 200

# A dotted subject path (user.food.lunch) asks for a subtree, not for words: it is matched
# by prefix only. Anything else (a word, a phrase) is also looked up in the marks' text.
_SUBJECT_PATH = re.compile(r"^[^\s.]+(\.[^\s.]+)+$")


def is_free_text(about: str) -> bool:
    return _SUBJECT_PATH.match(about.strip()) is None


def has_terms(about: str) -> bool:
    """Whether ``about`` is something the index can look for: free text with a term."""
    return is_free_text(about) and bool(query_terms(about))


def indexed_text(subject: str, observation: str) -> str:
    """What a mark's row is made of: its subject's segments are words like the rest."""
    return f"{subject} {observation}"


class MarkMeanings:
    """The marks known to the dense side, each with its workspace, and the meaning of
    those not erased. Not thread-safe: its owner serialises access."""

    def __init__(self, dense: DenseRanker[str]) -> None:
        self.dense = dense
        self._workspace: dict[str, str] = {}  # mark id -> workspace id

    def ids(self) -> KeysView[str]:
        """Every mark known, erased or not."""
        return self._workspace.keys()

    def add(self, mark_id: str, workspace: str, observation: str | None) -> None:
        """Know ``mark_id``; embed its ``observation`` unless it is ``None`` (erased)."""
        if observation is not None:
            self.dense.add(mark_id, (observation,))
        self._workspace[mark_id] = workspace

    def erase(self, mark_id: str) -> None:
        """Drop the mark's embedding (from the cache too); it stays known."""
        self.dense.erase(mark_id)

    def drop(self, mark_id: str) -> None:
        """Forget the mark entirely: its row is gone."""
        self.dense.erase(mark_id)
        del self._workspace[mark_id]

    def fuse(self, workspace: str, about: str, found: list[str]) -> list[str]:
        """``found`` (the lexical ranking, best first) fused with the marks of
        ``workspace`` closest to ``about`` in meaning."""

        def here(mark_id: str) -> bool:
            return self._workspace.get(mark_id) == workspace

        similar = self.dense.nearest(about, MAX_HITS, where=here)
        fused = reciprocal_rank_fusion(
            [found, ranking(similar, str)], weights=(1.0, DENSE_WEIGHT), k=FUSION_K
        )
        return ranking(fused, str)[:MAX_HITS]

    def flush(self) -> None:
        """Embed the texts added since the last search, now."""
        self.dense.flush()

    def prune(self) -> None:
        """Delete every cached embedding no known text has (call it once every live text
        is known)."""
        self.dense.prune()
