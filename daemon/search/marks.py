"""The marks' free-text search: what a query asks of the text index, and the dense side.

A mark is indexed as one row whose terms are its subject's segments and its observation's
words together (``people.arnold.plans`` / "moving to Lisbon" is found by ``arnold`` and by
``lisbon``). A dotted subject path asks for a subtree, not for words: it finds nothing
here (:func:`~daemon.search.text.is_free_text`). With a dense ranker (the marks' stored
vectors, which the daemon's worker fills), the lexical and dense rankings are fused as in
the daily layer (:func:`fused`). What is indexed is decided by its owner
(:class:`daemon.services.mark_search.MarkSearch`).
"""

from __future__ import annotations

from daemon.search.fusion import (
    DENSE_WEIGHT,
    FUSION_K,
    DenseRanker,
    ranking,
    reciprocal_rank_fusion,
)
from daemon.search.text import is_free_text, query_terms

# At most this many text hits go on to be scored by strength.
MAX_HITS = 200
# A query term held by more marks than this does not choose the hits (only its rarer terms
# do: :func:`~daemon.search.index.selective`): a workspace of 100,000 marks would otherwise
# be ranked whole for a word it says everywhere.
CHOOSING = 2000

# A dotted subject path (user.food.lunch) asks for a subtree, not for words: it is matched
# by prefix only (:func:`~daemon.search.text.is_free_text`). Anything else (a word, a
# phrase) is also looked up in the marks' text.


def has_terms(about: str) -> bool:
    """Whether ``about`` is something the index can look for: free text with a term."""
    return is_free_text(about) and bool(query_terms(about))


def indexed_text(subject: str, observation: str) -> str:
    """What a mark's row is made of: its subject's segments are words like the rest."""
    return f"{subject} {observation}"


def fused(dense: DenseRanker[str], workspace: str, about: str, found: list[str]) -> list[str]:
    """``found`` (the lexical ranking, best first) fused with the marks of ``workspace``
    closest to ``about`` in meaning (those embedded)."""
    similar = dense.nearest(about, MAX_HITS, scope=workspace)
    if not similar:  # (fused with nothing, the lexical ranking keeps its order)
        return found[:MAX_HITS]
    fused = reciprocal_rank_fusion(
        [found, ranking(similar, str)], weights=(1.0, DENSE_WEIGHT), k=FUSION_K
    )
    return ranking(fused, str)[:MAX_HITS]
