"""When two observations say the same thing: the rule that stops near-copies.

Two texts are compared by their *words*: Unicode NFKC, casefolded, split on anything that is
not a letter or a digit (so case, whitespace and punctuation never matter). The same words
in the same order are the same text; otherwise the share of distinct words they have in
common (Jaccard) must reach a threshold. Words are not stemmed and nothing is dropped, so
``went to bed at 23:00`` and ``went to bed at 22:00`` stay different facts.
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"[^\W_]+")

DEFAULT_SIMILARITY = 0.9


def normalize_text(text: str) -> str:
    """The words of ``text``, casefolded, joined by single spaces."""
    return " ".join(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


def similarity(a: str, b: str) -> float:
    """1.0 for the same normalized text; else the Jaccard index of the two sets of words."""
    first, second = normalize_text(a), normalize_text(b)
    if first == second:
        return 1.0
    words_a, words_b = set(first.split()), set(second.split())
    union = words_a | words_b
    return len(words_a & words_b) / len(union) if union else 0.0


def is_near_copy(a: str, b: str, threshold: float = DEFAULT_SIMILARITY) -> bool:
    return similarity(a, b) >= threshold
