"""When two observations say the same thing: the rule that stops near-copies.

Two texts are compared by their *words*: Unicode NFKC, casefolded, split on anything that is
not a letter or a digit (so case, whitespace and punctuation never matter). The same words
(in any order) are the same text; otherwise the share of distinct words they have in common
(Jaccard) must reach a threshold. Words are not stemmed and nothing is dropped, so
``went to bed at 23:00`` and ``went to bed at 22:00`` stay different facts.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_WORD = re.compile(r"[^\W_]+")

DEFAULT_SIMILARITY = 0.9


def normalize_text(text: str) -> str:
    """The words of ``text``, casefolded, joined by single spaces."""
    return " ".join(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


# A mark's text is compared with every new observation under its subject, so its words are
# worth remembering; the cache is bounded (a few MB at most).
@lru_cache(maxsize=16_384)
def _words(text: str) -> frozenset[str]:
    return frozenset(normalize_text(text).split())


def drop_cached_words() -> None:
    """Forget the words of every text remembered here (a forget erases every copy)."""
    _words.cache_clear()


def similarity(a: str, b: str) -> float:
    """The Jaccard index of the two texts' sets of words (1.0 for the same words)."""
    return _jaccard(_words(a), _words(b))


def is_near_copy(a: str, b: str, threshold: float = DEFAULT_SIMILARITY) -> bool:
    # Every new observation is compared with up to ten of its subject's marks: each text's
    # words are looked up once here.
    words_a, words_b = _words(a), _words(b)
    # Jaccard can reach the threshold only if the smaller set is big enough: a cheap "no".
    count_a, count_b = len(words_a), len(words_b)
    if min(count_a, count_b) < threshold * max(count_a, count_b):
        return False
    return _jaccard(words_a, words_b) >= threshold


def _jaccard(words_a: frozenset[str], words_b: frozenset[str]) -> float:
    if not words_a or not words_b:
        return 1.0 if words_a == words_b else 0.0
    common = len(words_a & words_b)  # (the union's size follows; no set built for it)
    return common / (len(words_a) + len(words_b) - common)
