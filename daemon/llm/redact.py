"""Secrets stay home: what is cut out of a day's lines before they leave the machine, and
out of what comes back from the model's side before it is stored or logged.

Each line keeps its place (a redacted line is still a line), so the line numbers the model
cites are the day's real line numbers. A secret is replaced by ``[REDACTED]``; for a
``key=value`` or ``password: value`` form only the value is replaced, so the model still
sees that a password was mentioned. Over-redacting is the safe failure here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

REDACTED = "[REDACTED]"

# Tokens with a recognisable shape (prefixes published by their issuers).
_TOKENS = re.compile(
    r"""
    \bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}          # OpenAI / Anthropic style keys
    | \bgh[pousr]_[A-Za-z0-9]{20,}                  # GitHub tokens
    | \bgithub_pat_[A-Za-z0-9_]{20,}
    | \bxox[abposr]-[A-Za-z0-9-]{10,}               # Slack tokens
    | \bAKIA[0-9A-Z]{16}\b                          # AWS access key ids
    | \bAIza[0-9A-Za-z_-]{35}                       # Google API keys
    | \bglpat-[A-Za-z0-9_-]{20,}                    # GitLab tokens
    | \beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}  # JWTs
    """,
    re.VERBOSE,
)

_BEARER = re.compile(r"(?i)\b(bearer|token)(\s+)[A-Za-z0-9._~+/=-]{8,}")

# `password=...`, `api_key: ...`, `"secret": "..."`, `my password is ...`.
_ASSIGNED = re.compile(
    r"""(?ix)
    \b(
        pass(?:word|wd|phrase)? | pwd | secret | client[_-]?secret | token | auth[_-]?token
        | access[_-]?token | refresh[_-]?token | api[_-]?key | apikey | access[_-]?key
        | secret[_-]?key | private[_-]?key | credentials?
    )
    (["']?\s*(?:[:=]|\bis\b)\s*["']?)
    ([^\s"',;]+)
    """
)

# Any long run of letters and digits mixing both, as keys and hashes look (but not words,
# dates or numbers): 32 or more characters.
_OPAQUE = re.compile(r"\b(?=[A-Za-z0-9_\-+/]*\d)(?=[A-Za-z0-9_\-+/]*[A-Za-z])[A-Za-z0-9_\-+/]{32,}")

# 13 to 19 digits, optionally grouped by spaces or dashes; checked with Luhn below.
_CARD = re.compile(r"\b\d(?:[ -]?\d){12,18}\b")

_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_KEY_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY-----")


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match[0])
    return REDACTED if _luhn(digits) else match[0]


def redact_line(line: str) -> str:
    """``line`` with every secret it visibly holds replaced by ``[REDACTED]``."""
    line = _TOKENS.sub(REDACTED, line)
    line = _BEARER.sub(lambda m: f"{m[1]}{m[2]}{REDACTED}", line)
    line = _ASSIGNED.sub(lambda m: f"{m[1]}{m[2]}{REDACTED}", line)
    line = _OPAQUE.sub(REDACTED, line)
    return _CARD.sub(_card, line)


def redact_lines(lines: Sequence[str]) -> list[str]:
    """Every line redacted; the lines of a PEM private key block (BEGIN to END) entirely."""
    redacted = []
    inside_key = False
    for line in lines:
        if _KEY_BEGIN.search(line) or inside_key:
            inside_key = not _KEY_END.search(line)
            redacted.append(REDACTED)
        else:
            redacted.append(redact_line(line))
    return redacted


def redact_text(text: str) -> str:
    """``text`` redacted line by line (so a private key block spanning lines goes too)."""
    return "\n".join(redact_lines(text.split("\n")))


def redact_value(value: Any) -> Any:
    """A JSON value with every string in it (keys too) redacted."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, dict):
        return {redact_text(key): redact_value(item) for key, item in value.items()}
    return value
