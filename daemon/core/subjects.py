"""Subjects are dot paths (``user.sleep.bedtime``). One normal form, one matching rule."""

from __future__ import annotations

import re

_DOTS = re.compile(r"\.{2,}")


def normalize_subject(subject: str) -> str:
    """Trim, lowercase, collapse repeated dots, strip trailing dots."""
    return _DOTS.sub(".", subject.strip().lower()).rstrip(".")


def subject_matches(prefix: str, candidate: str) -> bool:
    """Segment-prefix match: ``user.sleep`` matches ``user.sleep`` and ``user.sleep.bedtime``
    but not ``user.sleepover``; the empty prefix matches everything."""
    p = normalize_subject(prefix)
    c = normalize_subject(candidate)
    return p == "" or c == p or c.startswith(p + ".")
