"""The fast path's row encoding: which columns are JSON and which are instants is read off
the table, once, and only those are converted."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import JSON, Column, MetaData, String, Table

from daemon.core.json_text import json_text
from daemon.store.fast_path import Encoding
from daemon.store.tables import UTCDateTime

TABLE = Table(
    "t",
    MetaData(),
    Column("id", String),
    Column("body", JSON),
    Column("at", UTCDateTime),
    Column("note", String),
    Column("later", UTCDateTime, nullable=True),
)
AT = datetime(2026, 3, 29, 1, 30, tzinfo=UTC)


def test_only_the_json_and_instant_columns_are_converted() -> None:
    encoding = Encoding(TABLE, ["note", "at", "id", "body", "later"])
    row = encoding.encode(["n", AT, "a", {"x": [1, 2]}, None], lambda at: f"<{at.isoformat()}>")
    assert row == ["n", f"<{AT.isoformat()}>", "a", json_text({"x": [1, 2]}), None]
    assert (encoding.json_at, encoding.instants_at) == ((3,), (1, 4)), "positions in names"
