"""Subject normalization and segment-prefix matching."""

from __future__ import annotations

import pytest

from daemon.core.subjects import normalize_subject
from daemon.store.sql import escape_like
from daemon.testing import subject_matches


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("  User.Sleep  ", "user.sleep"),
        ("user..sleep", "user.sleep"),
        ("user...sleep...bedtime", "user.sleep.bedtime"),
        ("user.sleep.", "user.sleep"),
        ("user.sleep..", "user.sleep"),
        ("", ""),
    ],
)
def test_normalize(raw: str, normal: str) -> None:
    assert normalize_subject(raw) == normal


@pytest.mark.parametrize(
    ("prefix", "candidate", "matches"),
    [
        ("user.sleep", "user.sleep", True),
        ("user.sleep", "user.sleep.bedtime", True),
        ("user", "user.food.breakfast", True),
        ("user.sleep", "user.sleepover", False),
        ("user.sleep", "arnold.sleep", False),
        ("User.Sleep", "user.sleep.bedtime", True),
        ("", "user.sleep", True),
        ("a_b", "axb.c", False),
        ("a%", "a%.x", True),
        ("a%", "ab", False),
    ],
)
def test_segment_prefix(prefix: str, candidate: str, matches: bool) -> None:
    assert subject_matches(prefix, candidate) is matches


def test_like_escaping() -> None:
    assert escape_like("a_b%c\\d") == "a\\_b\\%c\\\\d"
