"""Subjects are dot paths (``user.sleep.bedtime``), in one normal form. They match by
segment prefix, in the marks' query (:mod:`daemon.store.marks`); the tests hold that rule
in Python (:func:`daemon.testing.subject_matches`) to check the SQL against."""

from __future__ import annotations

import re

_DOTS = re.compile(r"\.{2,}")


def normalize_subject(subject: str) -> str:
    """Trim, lowercase, collapse repeated dots, strip trailing dots."""
    return _DOTS.sub(".", subject.strip().lower()).rstrip(".")
