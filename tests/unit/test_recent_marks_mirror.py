"""The mirror of the subjects' recent marks, without a store: what a change it did not see
begin does to it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from daemon.store.recent_marks import CHARACTERS, COUNT, RecentMarks, install
from receptors.near_copies import CANDIDATES_PER_SUBJECT

KEY = ("w", "user.food")
ROW = ("2026-04-11 10:00:00.000000", "mk_a", "likes soup", "2026-04-11 10:00:00.000000")


def mirrored() -> RecentMarks:
    mirror = RecentMarks()
    mirror.begin(data_version=1)
    mirror.read(KEY, (ROW,))
    mirror.commit()
    return mirror


def test_a_change_in_a_transaction_the_writer_did_not_begin_empties_the_mirror() -> None:
    mirror = mirrored()
    # The pool lent the writer's connection to another transaction, whose trigger calls
    # arrive outside the writer's begin and commit.
    mirror.inserted("w", "user.food", "mk_b", "active", ROW[0], "likes bread", ROW[3])
    mirror.begin(data_version=1)
    assert mirror.get(KEY) is None


def test_a_commit_by_another_connection_empties_the_mirror() -> None:
    mirror = mirrored()
    mirror.begin(data_version=1)
    assert mirror.get(KEY) == (ROW,)
    mirror.rollback()
    mirror.begin(data_version=2)
    assert mirror.get(KEY) is None


def test_a_fault_of_the_mirror_fails_no_write_and_empties_it(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "marks.db", isolation_level=None)
    connection.execute(
        "CREATE TABLE memory_marks (id TEXT PRIMARY KEY, workspace_id TEXT, subject TEXT,"
        " state TEXT, last_reinforced_at TEXT, observation TEXT, first_observed_at TEXT)"
    )
    mirror = install(connection, {})
    assert mirror is not None
    mirror.begin(data_version=1)
    mirror.read(KEY, (ROW,))
    mirror.commit()
    mirror.begin(data_version=1)
    # A mark whose instant the mirror cannot order beside the others (None against text):
    connection.execute(
        "INSERT INTO memory_marks VALUES ('mk_b', 'w', 'user.food', 'active', NULL, 'x', NULL)"
    )
    assert connection.execute("SELECT count(*) FROM memory_marks").fetchone() == (1,)
    assert mirror.get(KEY) is None


def test_the_mirror_holds_as_many_marks_as_the_near_copy_check_compares() -> None:
    # (fewer, and every observation would read the store again)
    assert COUNT == CANDIDATES_PER_SUBJECT


def test_the_mirror_holds_a_bounded_amount_of_text() -> None:
    long = "word " * 3000  # 15,000 characters: a text may hold 16,384
    mirror = RecentMarks()
    mirror.begin(data_version=1)
    for n in range(200):
        rows = tuple((ROW[0], f"mk_{n}_{i}", long, ROW[3]) for i in range(COUNT))
        mirror.read(("w", f"user.topic{n}"), rows)
    mirror.commit()
    mirror.begin(data_version=1)
    kept = [n for n in range(200) if mirror.get(("w", f"user.topic{n}")) is not None]
    assert len(kept) * COUNT * len(long) <= CHARACTERS
    assert kept == list(range(200 - len(kept), 200))  # the most recently read
