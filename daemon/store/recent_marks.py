"""The subjects' most recently reinforced marks, mirrored in the writer's memory.

Every observation is compared with its subject's ten most recently reinforced current marks
(:mod:`receptors.near_copies`). Read from the store, that is a look-up of every mark the
subject ever had (the marks' index is by fingerprint, so the most recent ten are found by
sorting them all): 17 µs of CPU at 10 marks a subject, 70 µs at 100, and a subject a person
writes about for years holds thousands.

The mirror keeps each subject's ten as the store has them, once read, and the store keeps
the mirror: temporary triggers on ``memory_marks`` (on the writer's connection only) call
back into it for every row inserted, changed or deleted, whoever writes it. What a
transaction changes stays its own until it commits; a rollback, or a rollback to a
savepoint, undoes it here too. A commit by any other connection (another process, say)
empties the mirror (SQLite's ``data_version``). A change the mirror cannot follow exactly
(a mark deleted, moved to another subject, ended or revived, or its reinforcement moved
back) forgets that subject, which is read from the store again.

SQLite only: on PostgreSQL other daemons of a fleet write the same marks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import structlog
from sqlalchemy.engine import Connection

from daemon.core.records import CURRENT_MARK_STATES

log = structlog.get_logger("cambium.store")

# One subject's marks, most recently reinforced first: (last_reinforced_at, id, text,
# first_observed_at), instants as the store keeps them (their text sorts as they do).
Recent = tuple[tuple[str, str, str, str], ...]
Key = tuple[str, str]  # (workspace, subject)

COUNT = 10  # the marks mirrored per subject: the near-copy check's candidates
# At most this many subjects, and this many characters of their texts in all (a text may
# hold 16,384): the least recently used subjects are forgotten first.
SUBJECTS = 1024
CHARACTERS = 2_000_000

_INFO_KEY = "cambium.recent_marks"
_MISSING: Any = object()
_CURRENT = frozenset(CURRENT_MARK_STATES)
_COLUMNS = "workspace_id, subject, id, state, last_reinforced_at, observation, first_observed_at"


def _row(prefix: str) -> str:
    return ", ".join(f"{prefix}.{column.strip()}" for column in _COLUMNS.split(","))


_TRIGGERS = (
    "CREATE TEMP TRIGGER IF NOT EXISTS cambium_recent_inserted AFTER INSERT ON main.memory_marks"
    f" BEGIN SELECT cambium_recent_inserted({_row('NEW')}); END",
    "CREATE TEMP TRIGGER IF NOT EXISTS cambium_recent_updated AFTER UPDATE OF"
    f" {_COLUMNS} ON main.memory_marks BEGIN SELECT cambium_recent_updated(OLD.workspace_id,"
    f" OLD.subject, OLD.state, OLD.last_reinforced_at, {_row('NEW')}); END",
    "CREATE TEMP TRIGGER IF NOT EXISTS cambium_recent_deleted AFTER DELETE ON main.memory_marks"
    " BEGIN SELECT cambium_recent_deleted(OLD.workspace_id, OLD.subject); END",
)


class RecentMarks:
    """The mirror of one SQLite connection (the writer's)."""

    def __init__(self) -> None:
        self._committed: OrderedDict[Key, Recent] = OrderedDict()
        self._characters = 0  # of the committed texts
        # This transaction's view: a subject read or changed in it (None: not known, read
        # the store); and how to undo each step, for a savepoint's rollback.
        self._staged: dict[Key, Recent | None] = {}
        self._undo: list[tuple[Key, Any]] = []
        self._data_version: int | None = None
        self._open = False  # between begin and commit or rollback

    # -- what the near-copy check asks ----------------------------------------------------

    def get(self, key: Key) -> Recent | None:
        """The subject's marks as this transaction sees them, if known."""
        staged = self._staged.get(key, _MISSING)
        if staged is not _MISSING:
            return staged  # type: ignore[no-any-return]
        return self._committed.get(key)

    def read(self, key: Key, recent: Recent) -> None:
        """The subject's marks as this transaction just read them from the store."""
        self._stage(key, recent)

    # -- the transaction ------------------------------------------------------------------

    def begin(self, data_version: int) -> None:
        if data_version != self._data_version:  # another connection committed
            self._empty()
            self._data_version = data_version
        self._staged.clear()
        self._undo.clear()
        self._open = True

    def commit(self) -> None:
        for key, recent in self._staged.items():
            self._characters -= _characters(self._committed.pop(key, ()))
            if recent is not None:
                self._committed[key] = recent
                self._characters += _characters(recent)
        while len(self._committed) > SUBJECTS or self._characters > CHARACTERS:
            self._characters -= _characters(self._committed.popitem(last=False)[1])
        self.rollback()

    def rollback(self) -> None:
        self._staged.clear()
        self._undo.clear()
        self._open = False

    def reset(self) -> None:
        """Forget everything, and stay out of the transaction under way."""
        self._empty()
        self.rollback()

    def _empty(self) -> None:
        self._committed.clear()
        self._characters = 0

    def savepoint(self) -> int:
        return len(self._undo)

    def rollback_to(self, savepoint: int) -> None:
        while len(self._undo) > savepoint:
            key, before = self._undo.pop()
            if before is _MISSING:
                del self._staged[key]
            else:
                self._staged[key] = before

    # -- the triggers' calls --------------------------------------------------------------

    def inserted(
        self, workspace: str, subject: str, id: str, state: str, last: str, text: str, first: str
    ) -> None:
        key = (workspace, subject)
        recent = self.get(key)
        if recent is not None and state in _CURRENT:
            self._stage(key, _ranked((*recent, (last, id, text, first))))

    def updated(
        self,
        old_workspace: str,
        old_subject: str,
        old_state: str,
        old_last: str,
        *new: str,
    ) -> None:
        workspace, subject, id, state, last, text, first = new
        key = (workspace, subject)
        old_key = (old_workspace, old_subject)
        current = state in _CURRENT
        if old_key != key or (old_state in _CURRENT) != current:
            self._forget(old_key)
            self._forget(key)
            return
        recent = self.get(key)
        if recent is None or not current:
            return
        if last < old_last:
            self._forget(key)  # (whether a mark not mirrored now ranks among them is unknown)
            return
        others = tuple(entry for entry in recent if entry[1] != id)
        self._stage(key, _ranked((*others, (last, id, text, first))))

    def deleted(self, workspace: str, subject: str) -> None:
        self._forget((workspace, subject))

    def _forget(self, key: Key) -> None:
        if self.get(key) is not None:
            self._stage(key, None)

    def _stage(self, key: Key, recent: Recent | None) -> None:
        if not self._open:
            # A transaction the writer did not begin (its pool lent the connection to
            # another): its outcome is not ours to know.
            self._empty()
            return
        self._undo.append((key, self._staged.get(key, _MISSING)))
        self._staged[key] = recent


def _characters(recent: Recent) -> int:
    return sum(len(entry[2]) for entry in recent)


def _ranked(entries: tuple[tuple[str, str, str, str], ...]) -> Recent:
    """The most recently reinforced :data:`COUNT`, as the store's query orders them."""
    return tuple(sorted(entries, key=lambda entry: (entry[0], entry[1]), reverse=True)[:COUNT])


def mirror_of(connection: Connection) -> RecentMarks | None:
    """The writer connection's mirror, once :func:`install` set it up."""
    found: RecentMarks | None = connection.connection.info.get(_INFO_KEY)
    return found


def install(driver: Any, info: dict[str, Any]) -> RecentMarks | None:
    """The mirror of a writer's SQLite connection (``driver``, outside a transaction: a
    rollback would take the triggers away again), set up on first use; None while the
    store has no marks table yet (before its migrations)."""
    found: RecentMarks | None = info.get(_INFO_KEY)
    if found is not None:
        return found
    tables = driver.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'memory_marks'"
    ).fetchone()[0]
    if not tables:
        return None
    mirror = RecentMarks()
    driver.create_function("cambium_recent_inserted", 7, _never_failing(mirror, mirror.inserted))
    driver.create_function("cambium_recent_updated", 11, _never_failing(mirror, mirror.updated))
    driver.create_function("cambium_recent_deleted", 2, _never_failing(mirror, mirror.deleted))
    for trigger in _TRIGGERS:
        driver.execute(trigger)
    info[_INFO_KEY] = mirror
    return mirror


def _never_failing(mirror: RecentMarks, call: Callable[..., None]) -> Callable[..., None]:
    """A trigger's call into the mirror. Raising there would fail the write that fired it:
    a fault of the mirror empties it instead, and the store is read."""

    def safely(*row: Any) -> None:
        try:
            call(*row)
        except Exception:
            log.exception("the recent marks' mirror failed; it starts again empty")
            mirror.reset()

    return safely


def data_version(driver: Any) -> int:
    return int(driver.execute("PRAGMA data_version").fetchone()[0])
