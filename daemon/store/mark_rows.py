"""The marks' statements on every observation, on the driver (:mod:`daemon.store.fast_path`):
inserting new marks, a row built straight from each :class:`~daemon.core.records.Mark`
(no per-row type processing), and the two reads behind "no near-copies", each through the
``(workspace_id, subject, fingerprint)`` index."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from sqlalchemy.engine import Connection

from daemon.core.likeness import normalize_text
from daemon.core.records import CURRENT_MARK_STATES, Mark
from daemon.store.fast_path import Encoding, Raw, memo
from daemon.store.recent_marks import COUNT as MIRRORED
from daemon.store.recent_marks import mirror_of
from daemon.store.tables import MarkTable

marks = MarkTable.__table__  # type: ignore[attr-defined]

_COLUMNS = tuple(c.name for c in marks.c)
_FIELDS = attrgetter(*(name for name in _COLUMNS if name != "fingerprint"))
_FINGERPRINT_AT = _COLUMNS.index("fingerprint")
_ENCODING = Encoding(marks, _COLUMNS)
_INSERT = (
    f"INSERT INTO memory_marks ({', '.join(_COLUMNS)})"
    f" VALUES ({', '.join('?' * len(_COLUMNS))}) ON CONFLICT DO NOTHING"
)
_CURRENT = ", ".join(f"'{state}'" for state in CURRENT_MARK_STATES)
_OLDEST_WITH_FINGERPRINT = (
    "SELECT id FROM memory_marks WHERE workspace_id = ? AND subject = ? AND fingerprint = ?"
    f" AND state IN ({_CURRENT}) ORDER BY first_observed_at, id LIMIT 1"
)
_RECENT = (
    "SELECT last_reinforced_at, id, observation, first_observed_at FROM memory_marks"
    f" WHERE workspace_id = ? AND subject = ? AND state IN ({_CURRENT})"
    " ORDER BY last_reinforced_at DESC, id DESC LIMIT ?"
)


def fingerprint(subject: str, observation: str) -> str:
    """Finds the marks saying the same thing under a subject through an index: case,
    whitespace and punctuation aside (:func:`daemon.core.likeness.normalize_text`)."""
    normalized = normalize_text(observation)
    return hashlib.sha256(f"{subject}\x1f{normalized}".encode()).hexdigest()[:32]


def insert_marks(connection: Connection, new: Sequence[Mark]) -> None:
    """Insert marks in one ``executemany``, skipping ids already stored."""
    raw = Raw(connection)
    instant = memo(raw.instant)
    rows = []
    for mark in new:
        values: list[Any] = list(_FIELDS(mark))
        values.insert(_FINGERPRINT_AT, fingerprint(mark.subject, mark.observation))
        rows.append(_ENCODING.encode(values, instant))
    raw.executemany(_INSERT, rows)


def oldest_with_fingerprint(
    connection: Connection, workspace: str, subject: str, fingerprint: str
) -> str | None:
    """The id of the oldest current mark with ``fingerprint`` under the subject."""
    cursor = Raw(connection).execute(_OLDEST_WITH_FINGERPRINT, (workspace, subject, fingerprint))
    row = cursor.fetchone()
    cursor.close()
    return None if row is None else str(row[0])


def recent_texts(
    connection: Connection, workspace: str, subject: str, count: int
) -> list[tuple[str, str]]:
    """(id, text) of the subject's ``count`` most recently reinforced current marks, oldest
    first: from the writer's mirror (:mod:`daemon.store.recent_marks`) when it knows them."""
    mirror = mirror_of(connection) if count == MIRRORED else None
    key = (workspace, subject)
    rows = None if mirror is None else mirror.get(key)
    if rows is None:
        cursor = Raw(connection).execute(_RECENT, (workspace, subject, count))
        rows = tuple(cursor.fetchall())
        cursor.close()
        if mirror is not None:
            mirror.read(key, rows)
    return [(row[1], row[2]) for row in sorted(rows, key=lambda row: (row[3], row[1]))]
