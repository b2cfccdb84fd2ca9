"""Small SQL helpers shared by the query modules."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any, TypeVar

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select
from sqlalchemy.sql.dml import Insert, ReturningInsert

from daemon.store.tables import UTCDateTime

# Long IN lists stay under every driver's limit on bound parameters (SQLite's is the lowest).
IN_LIST_LIMIT = 500

T = TypeVar("T")


@cache
def insert_ignoring_duplicates(table: Table, dialect: str) -> Insert:
    """``INSERT ... ON CONFLICT DO NOTHING``: rows whose key is already stored are skipped."""
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    raise ValueError(f"unsupported database: {dialect}")


def upsert(table: Table, dialect: str, key: list[str], updated: list[str]) -> Insert:
    """``INSERT ... ON CONFLICT (key) DO UPDATE``: the row is inserted, or its ``updated``
    columns are set from the values given."""
    if dialect == "postgresql":
        pg = postgresql.insert(table)
        return pg.on_conflict_do_update(
            index_elements=key, set_={name: pg.excluded[name] for name in updated}
        )
    if dialect == "sqlite":
        lite = sqlite.insert(table)
        return lite.on_conflict_do_update(
            index_elements=key, set_={name: lite.excluded[name] for name in updated}
        )
    raise ValueError(f"unsupported database: {dialect}")


@cache
def _insert_returning_key(table: Table, dialect: str) -> ReturningInsert[Any]:
    # RETURNING rather than rowcount: psycopg reports no rowcount for ON CONFLICT inserts.
    return insert_ignoring_duplicates(table, dialect).returning(*table.primary_key.columns)


def insert_or_ignore(connection: Connection, table: Table, row: dict[str, Any]) -> bool:
    """Insert ``row`` unless a row with the same key is already stored, in one statement
    instead of a look-up and an insert. True if it was inserted."""
    statement = _insert_returning_key(table, connection.dialect.name)
    return connection.execute(statement, row).first() is not None


# Rows fetched at a time by :func:`streamed_rows`.
STREAM_BATCH = 2_000


def streamed_rows(connection: Connection, query: Select[Any]) -> Iterator[dict[str, Any]]:
    """Each row of ``query`` as its column mapping, fetched a batch at a time: an export of
    years of signals is never held whole (on PostgreSQL, through a server-side cursor)."""
    options = {"stream_results": True, "yield_per": STREAM_BATCH}
    for row in connection.execution_options(**options).execute(query).mappings():
        yield dict(row)


def escape_like(text: str, escape: str = "\\") -> str:
    """Make ``text`` literal inside a SQL LIKE pattern (``%`` and ``_`` are wildcards)."""
    return text.replace(escape, escape * 2).replace("%", escape + "%").replace("_", escape + "_")


def text_for_store(text: str, max_chars: int) -> str:
    """``text`` as every store accepts it: PostgreSQL refuses NUL in text, so it is shown as
    ``\\x00``; cut to ``max_chars``."""
    return text.replace("\x00", "\\x00")[:max_chars]


def with_instants(table: Table, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Exported rows (instants as ISO 8601 text) as the table takes them (datetimes); only
    the table's own columns are kept."""
    instants = {c.name for c in table.columns if isinstance(c.type, UTCDateTime)}
    names = {c.name for c in table.columns}
    return [
        {
            key: datetime.fromisoformat(value) if key in instants and value is not None else value
            for key, value in row.items()
            if key in names
        }
        for row in rows
    ]


def driver_instant(value: datetime | str) -> datetime:
    """An instant as the driver hands it back (SQLite: the stored text, in UTC; PostgreSQL:
    an aware time), aware and in UTC, as :class:`UTCDateTime` reads it."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def in_chunks(items: Sequence[T], size: int = IN_LIST_LIMIT) -> Iterator[Sequence[T]]:
    """``items`` in consecutive slices of at most ``size``, each once, in order, for an
    ``IN`` list: each is padded to a power of two (or ``size``) by repeating its last item.

    ``IN`` is a set, so the copies change nothing, and the statements come in a dozen
    shapes instead of one per length: the driver keeps every shape it prepared (sqlite3: 128
    a connection), and a recall's 1 to 200 marks, or a second's stored marks indexed, each
    a length of their own, held megabytes of prepared statements (the daemon's RSS grew by
    8-13 MB over 40,000 signals, 4-5 MB with the driver keeping 16)."""
    for start in range(0, len(items), size):
        chunk = list(items[start : start + size])
        shape = min(size, 1 << (len(chunk) - 1).bit_length())
        yield chunk + chunk[-1:] * (shape - len(chunk))
