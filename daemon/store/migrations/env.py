"""Alembic environment: runs migrations against the URL the caller configured.

Each revision runs in one transaction with the update of its version row, on both stores:
a crash at any point leaves the store at the revision before or after it, never between.
PostgreSQL's DDL is transactional; SQLite's is too, but only once the sqlite3 module's own
transaction handling (which lets DDL commit on its own) is taken away and BEGIN is issued
here. ``progress``, if the caller set it in the config's attributes, is told each step.
"""

import time
from collections.abc import Callable
from typing import Any

from alembic import context
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool
from sqlmodel import SQLModel

import daemon.store.tables  # noqa: F401  (registers the tables on the metadata)

config = context.config
target_metadata = SQLModel.metadata


def transactional_engine(url: str) -> Engine:
    engine = create_engine(url, poolclass=NullPool)
    if engine.dialect.name != "sqlite":
        return engine

    @event.listens_for(engine, "connect")
    def _no_driver_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def progress_reporter() -> Callable[..., None]:
    """The ``on_version_apply`` callback: each revision's time, as the caller wants it."""
    progress: Callable[[str], None] = config.attributes.get("progress") or (lambda _: None)
    started = time.monotonic()

    def applied(*, step: Any, **_: Any) -> None:
        nonlocal started
        now = time.monotonic()
        progress(f"revision {step.destination_revision_ids[0]} applied in {now - started:.1f} s")
        started = now

    return applied


def run() -> None:
    url = config.get_main_option("sqlalchemy.url")
    assert url, "sqlalchemy.url is not set"
    if context.is_offline_mode():
        context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = transactional_engine(url)
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=connection.dialect.name == "sqlite",
                transactional_ddl=True,
                transaction_per_migration=True,
                on_version_apply=progress_reporter(),
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


run()
