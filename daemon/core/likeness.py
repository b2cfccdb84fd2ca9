"""When two observations say the same thing: the rule that stops near-copies.

Two texts are compared by their *words*: Unicode NFKC, casefolded, split on anything that is
not a letter or a digit (so case, whitespace and punctuation never matter). The same words
(in any order) are the same text; otherwise the share of distinct words they have in common
(Jaccard) must reach a threshold. Words are not stemmed and nothing is dropped, so
``went to bed at 23:00`` and ``went to bed at 22:00`` stay different facts.
"""

from __future__ import annotations

import re
import threading
import unicodedata

_WORD = re.compile(r"[^\W_]+")

DEFAULT_SIMILARITY = 0.9

# A mark's text is compared with every new observation under its subject, so its words are
# worth remembering; but a text's set of words takes about 20 bytes a character of it
# (measured), and an observation may hold 16,384 characters: the texts remembered hold at
# most this many characters in all (about 20 MB).
CACHED_CHARACTERS = 1_000_000
# A longer text is not remembered: it would push out hundreds of short ones.
CACHED_TEXT = 2_048


def normalize_text(text: str) -> str:
    """The words of ``text``, casefolded, joined by single spaces."""
    return " ".join(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


class _Words:
    """Texts' sets of words, the first remembered given up first. A look-up takes no lock
    (one dict read, atomic under the GIL); remembering takes one, for the writer compares
    while recall threads run."""

    def __init__(self) -> None:
        self._sets: dict[str, frozenset[str]] = {}
        self._characters = 0
        self._lock = threading.Lock()

    def __call__(self, text: str) -> frozenset[str]:
        found = self._sets.get(text)
        return found if found is not None else self._remembered(text)

    def _remembered(self, text: str) -> frozenset[str]:
        found = frozenset(normalize_text(text).split())
        if len(text) > CACHED_TEXT:
            return found
        with self._lock:
            if text not in self._sets:
                self._sets[text] = found
                self._characters += len(text)
                while self._characters > CACHED_CHARACTERS:
                    oldest = next(iter(self._sets))
                    del self._sets[oldest]
                    self._characters -= len(oldest)
        return found

    @property
    def characters(self) -> int:
        """How many characters of text are remembered."""
        return self._characters

    def clear(self) -> None:
        with self._lock:
            self._sets.clear()
            self._characters = 0


_words = _Words()


def drop_cached_words() -> None:
    """Forget the words of every text remembered here (a forget erases every copy)."""
    _words.clear()


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
