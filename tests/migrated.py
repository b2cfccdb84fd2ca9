"""Stores at head without running every migration for every test: the real ``upgrade`` runs
once per session (per xdist worker), and each store test starts from what it made. Running
Alembic costs ~0.5 s a test on SQLite and ~2 s on PostgreSQL; a copy costs a few
milliseconds, a replay ~0.14 s, and emptying a PostgreSQL schema used before ~0.015 s. The
migrations themselves are tested on their own (test_store.py, test_migrations.py), through
``upgrade`` on fresh databases."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

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


class PostgresSchemas:
    """Schemas at head, used again from test to test: a replay of the upgrade costs ~0.14 s,
    emptying a used schema ~0.02 s. A schema given back is emptied (every table's rows
    deleted with triggers and foreign keys off, the sequences restarted, the rows the
    migrations themselves wrote put back) and checked to still have the shape of a replay;
    one a test changed the shape of, or left locked, is dropped instead."""

    def __init__(self, schemas: Callable[[], AbstractContextManager[tuple[str, str]]]) -> None:
        self._schemas = schemas  # makes an empty schema and drops it on exit
        self._free: list[tuple[str, AbstractContextManager[tuple[str, str]]]] = []
        self._lent: dict[str, AbstractContextManager[tuple[str, str]]] = {}
        self._seeded: dict[str, list[dict[str, Any]]] = {}
        self._shape: tuple[Any, ...] = ()

    def take(self, statements: Statements) -> str:
        """The URL of a schema at head holding only what the migrations wrote."""
        if self._free:
            url, made = self._free.pop()
        else:
            made = self._schemas()
            url, _ = made.__enter__()
            replay(url, statements)
            if not self._shape:
                self._seeded = _rows(url)
                self._shape = _emptied(url, self._seeded)
        self._lent[url] = made
        return url

    def give_back(self, url: str) -> None:
        made = self._lent.pop(url)
        try:
            kept = _emptied(url, self._seeded) == self._shape
        except SQLAlchemyError:
            kept = False
        if kept:
            self._free.append((url, made))
        else:
            made.__exit__(None, None, None)

    def drop_all(self) -> None:
        for _, made in self._free:
            made.__exit__(None, None, None)
        self._free.clear()


def _rows(url: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table but Alembic's own, by table."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            tables = connection.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
            ).scalars()
            return {
                table: [
                    dict(row)
                    for row in connection.execute(text(f'SELECT * FROM "{table}"')).mappings()
                ]
                for table in tables
                if table != "alembic_version"
            }
    finally:
        engine.dispose()


# What a schema is made of, counted from the catalog: a test that added, dropped or altered
# a table, a column, an index or a trigger changes it.
SHAPE = """SELECT
  (SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace),
  (SELECT count(*) FROM pg_attribute JOIN pg_class ON attrelid = pg_class.oid
   WHERE relnamespace = current_schema()::regnamespace AND attnum > 0 AND NOT attisdropped),
  (SELECT count(*) FROM pg_trigger JOIN pg_class ON tgrelid = pg_class.oid
   WHERE relnamespace = current_schema()::regnamespace),
  (SELECT string_agg(version_num, ',') FROM alembic_version)"""


def _emptied(url: str, seeded: dict[str, list[dict[str, Any]]]) -> tuple[Any, ...]:
    """Empty the schema but for the rows the migrations wrote; its shape (:data:`SHAPE`)."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("SET LOCAL lock_timeout = '2s'"))  # a test left it locked
            connection.execute(text("SET LOCAL session_replication_role = replica"))
            for table, rows in seeded.items():
                connection.execute(text(f'DELETE FROM "{table}"'))
                for row in rows:
                    columns = ", ".join(f'"{column}"' for column in row)
                    values = ", ".join(f":{column}" for column in row)
                    connection.execute(
                        text(f'INSERT INTO "{table}" ({columns}) VALUES ({values})'), row
                    )
            sequences = connection.execute(
                text("SELECT sequencename FROM pg_sequences WHERE schemaname = current_schema()")
            ).scalars()
            for sequence in list(sequences):
                connection.execute(text(f'ALTER SEQUENCE "{sequence}" RESTART'))
            return tuple(connection.execute(text(SHAPE)).one())
    finally:
        engine.dispose()
