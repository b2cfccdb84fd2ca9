"""Stores at head without running every migration for every test: the real ``upgrade`` runs
once per session (per xdist worker), and each store test starts from what it made. Running
Alembic costs ~0.5 s a test on SQLite and ~2 s on PostgreSQL; a copy or a replay costs a
few milliseconds. The migrations themselves are tested on their own (test_store.py,
test_migrations.py), through ``upgrade`` on fresh databases."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import Connection

from daemon.store.migrate import upgrade

# What the upgrade ran, in order: (statement, parameters, executemany?).
Statements = list[tuple[str, Any, bool]]
# The migration lock is the upgrade's own business (keyed by the scratch schema's name).
SKIPPED = ("pg_advisory_lock", "pg_advisory_unlock")


def migrate_sqlite_template(path: Path) -> Path:
    upgrade(f"sqlite:///{path}")
    assert not path.with_name(f"{path.name}-wal").exists(), "the template is checkpointed"
    return path


def copy_sqlite(template: Path, url: str) -> None:
    """The template, byte for byte, at the file of a ``sqlite:///`` URL."""
    shutil.copyfile(template, url.removeprefix("sqlite:///"))


@contextmanager
def _recording(statements: Statements) -> Iterator[None]:
    def record(
        conn: Connection, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        if not any(skipped in statement for skipped in SKIPPED):
            statements.append((statement, parameters, many))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield
    finally:
        event.remove(Engine, "before_cursor_execute", record)


def record_postgres_upgrade(url: str, schema: str) -> Statements:
    """Run the real upgrade on the empty schema of ``url`` and return every statement it
    sent. None names the schema (the upgrade works through the search path), so they can
    be replayed into any other empty schema."""
    statements: Statements = []
    with _recording(statements):
        upgrade(url)
    assert not any(schema in f"{s} {p}" for s, p, _ in statements), "schema-free statements"
    return statements


def replay(url: str, statements: Statements) -> None:
    """The recorded upgrade, statement for statement, on the empty schema of ``url``."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            for statement, parameters, _ in statements:
                if parameters:
                    connection.exec_driver_sql(statement, parameters)
                else:
                    connection.exec_driver_sql(statement)
    finally:
        engine.dispose()


def shape(url: str, schema: str) -> list[tuple[Any, ...]]:
    """The schema's tables, columns, indexes and revision (its own name left out), to compare
    a replay with the upgrade it replays."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            found = connection.execute(
                text(
                    "SELECT table_name, column_name, data_type, is_nullable, column_default "
                    "FROM information_schema.columns WHERE table_schema = current_schema() "
                    "UNION ALL SELECT tablename, indexname, indexdef, '', '' FROM pg_indexes "
                    "WHERE schemaname = current_schema() ORDER BY 1, 2"
                )
            )
            rows = [tuple(str(v).replace(f"{schema}.", "") for v in row) for row in found]
            version = connection.execute(text("SELECT version_num FROM alembic_version"))
            return [*rows, ("alembic_version", *version.scalars().all())]
    finally:
        engine.dispose()
