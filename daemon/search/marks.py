"""The mark index: free text finds marks by what their observations say.

A BM25 index (the same ranked matcher as the substrate, daily and compost layers) over
every mark's observation, by mark id, with the workspace each mark belongs to; with a dense
ranker, every observation is also embedded and the lexical and dense rankings are fused as
in the daily layer. A dotted subject path asks for a subtree, not for words: it finds
nothing here (:func:`is_free_text`). What the index holds is decided by its owner
(:class:`daemon.services.mark_text.MarkText`, which follows the marks table).
"""

from __future__ import annotations

import re
from collections.abc import KeysView

from daemon.search.fusion import (
    DENSE_WEIGHT,
    FUSION_K,
    DenseRanker,
    HybridIndex,
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


class MarkIndex:
    """The marks known to the index, each with its workspace, and the text of those not
    erased. Not thread-safe: its owner serialises access."""

    def __init__(self, dense: DenseRanker[str] | None = None) -> None:
        self._lexical: HybridIndex[str] = HybridIndex(dense)
        self._workspace: dict[str, str] = {}  # mark id -> workspace id

    def ids(self) -> KeysView[str]:
        """Every mark known, erased or not."""
        return self._workspace.keys()

    def add(self, mark_id: str, workspace: str, observation: str | None) -> None:
        """Know ``mark_id``; index its ``observation`` unless it is ``None`` (erased)."""
        if observation is not None:
            self._lexical.add(mark_id, observation)
        self._workspace[mark_id] = workspace

    def erase(self, mark_id: str) -> None:
        """Drop the mark's text (and its embedding from the cache); it stays known."""
        self._lexical.erase(mark_id)

    def drop(self, mark_id: str) -> None:
        """Forget the mark entirely: its row is gone."""
        self._lexical.erase(mark_id)
        del self._workspace[mark_id]

    def search(self, workspace: str, about: str) -> list[str]:
        """Ids of the marks in ``workspace`` whose observation holds a word of ``about``
        (or, with a dense ranker, is close to it in meaning), most relevant first."""

        def here(mark_id: str) -> bool:
            return self._workspace[mark_id] == workspace

        found = [hit.key for hit in self._lexical.search(about, MAX_HITS, where=here)]
        if self._lexical.dense is None:
            return found
        similar = self._lexical.dense.nearest(about, MAX_HITS, where=here)
        fused = reciprocal_rank_fusion(
            [found, ranking(similar, str)], weights=(1.0, DENSE_WEIGHT), k=FUSION_K
        )
        return ranking(fused, str)[:MAX_HITS]

    def flush(self) -> None:
        """Embed (with a dense ranker) the texts added since the last search, now."""
        if self._lexical.dense is not None:
            self._lexical.dense.flush()

    def prune(self) -> None:
        """Delete every cached embedding no indexed text has (with a dense ranker; call it
        once every live text is indexed)."""
        if self._lexical.dense is not None:
            self._lexical.dense.prune()
