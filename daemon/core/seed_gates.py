"""What a seed may propose: the gates a ``memory.seed_planted`` passes before it is stored.

A seed asks the user to add lasting knowledge to a substrate file. Three kinds of text are
refused, each with its rule named:

- ``status-shaped``: a progress report, not knowledge ("done", "fixed", "completed on
  2026-03-02"); it is stale by the time anyone reviews it.
- ``self-referential``: text about the memory system itself (its marks, seeds, recall),
  which would make the user's files describe the tool instead of the user.
- ``carries-a-secret``: keys, tokens, passwords; substrate files are plain text that is
  read back into prompts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_STATUS_WORDS = (
    r"done|fixed|completed?|finished|resolved|closed|merged|shipped|deployed|wip|"
    r"in progress|started|todo|to do|blocked"
)
# The whole text is a status word (with optional trailing punctuation), or it starts with
# one followed by a date or "on/at/in <something>", or it is a dated progress note.
_STATUS = re.compile(
    rf"^\s*(?:[-*]\s*)?(?:\[[ xX]\]\s*)?(?:{_STATUS_WORDS})\s*[.!:]*\s*$"
    rf"|^\s*(?:[-*]\s*)?(?:{_STATUS_WORDS})\b[\s:,-]*(?:on|at|in|by|as of)?\s*"
    r"\d{4}-\d{2}-\d{2}"
    rf"|^\s*\d{{4}}-\d{{2}}-\d{{2}}\b[\s:,-]*(?:{_STATUS_WORDS})\b"
    rf"|\b(?:{_STATUS_WORDS})\s+(?:on|at|as of)\s+\d{{4}}-\d{{2}}-\d{{2}}\b"
    r"|^\s*(?:[-*]\s*)?(?:fixed|completed|finished|resolved|merged|shipped|deployed)\b",
    re.IGNORECASE,
)
_SELF_REFERENTIAL = re.compile(
    r"\bcambium\b|\bmemory (?:system|daemon|store|layers?)\b|\bthis memory\b"
    r"|\b(?:memory|these|this) (?:marks?|seeds?)\b|\bseeds? (?:planted|review|pending)\b"
    r"|\bmarks? (?:strength|decay|withers?|withered)\b|\brecall (?:results?|layer)\b"
    r"|\bsignal (?:bus|log)\b|\breceptors?\b|\b(?:mk|sd|tb)_[0-9a-f]{8,}\b",
    re.IGNORECASE,
)
_SECRET = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|\b(?:sk|pk|rk)-(?:live-|test-|proj-)?[A-Za-z0-9_-]{16,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}|\bAKIA[0-9A-Z]{16}\b|\bAIza[0-9A-Za-z_-]{30,}"
    r"|\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"
    r"|\bbearer\s+[A-Za-z0-9._~+/=-]{16,}"
    r"|\b(?:password|passwd|passphrase|pwd|secret|api[_ -]?key|access[_ -]?token|token)"
    r"\s*(?:is|=|:)\s*\S{4,}",
    re.IGNORECASE,
)

GATES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("status-shaped", _STATUS, "it reads as a status or progress note, not lasting knowledge"),
    ("self-referential", _SELF_REFERENTIAL, "it is about the memory system itself"),
    ("carries-a-secret", _SECRET, "it carries a secret (a key, token or password)"),
)


@dataclass(frozen=True)
class GateRefusal:
    rule: str
    why: str

    def __str__(self) -> str:
        return f"refused by the {self.rule} rule: {self.why}"


def seed_refusal(text: str) -> GateRefusal | None:
    """The first gate ``text`` fails, or None when a seed may propose it."""
    for rule, pattern, why in GATES:
        if pattern.search(text):
            return GateRefusal(rule, why)
    return None
