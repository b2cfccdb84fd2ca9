"""The store: migrations, SQLite durability settings, the group-committing writer."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, text
from sqlmodel import SQLModel

from daemon.store import Store
from daemon.store.migrate import current_revision, head_revision, upgrade


def test_migrations_reach_head_and_match_the_models(db_url: str) -> None:
    upgrade(db_url)
    assert current_revision(db_url) == head_revision() == "0003"
    upgrade(db_url)  # a second upgrade is a no-op
    engine = create_engine(db_url)
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    engine.dispose()
    assert diff == [], "models and migrations disagree"


def test_sqlite_is_wal_with_full_sync_and_a_busy_timeout(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/c.db"
    upgrade(url)
    store = Store(url)
    try:
        with store._writer.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
    finally:
        store.close()


@pytest.mark.asyncio
async def test_concurrent_writes_share_commits_and_a_failure_stays_alone(store: Store) -> None:
    store.write_sync(
        lambda tx: tx.connection.execute(text("CREATE TABLE t (n INTEGER NOT NULL UNIQUE)"))
    )
    results: dict[int, str] = {}

    async def insert(n: int) -> None:
        value = 1 if n == 13 else n  # 13 collides with 1: only that write may fail
        try:
            await store.write(
                lambda tx: tx.connection.execute(text("INSERT INTO t VALUES (:n)"), {"n": value})
            )
            results[n] = "ok"
        except Exception:
            results[n] = "failed"

    async with anyio.create_task_group() as tg:
        for n in range(1, 201):
            tg.start_soon(insert, n)
    rows = store.read_sync(
        lambda tx: sorted(tx.connection.execute(text("SELECT n FROM t")).scalars())
    )
    assert len(rows) == 199 and 13 not in rows
    assert [n for n, r in results.items() if r == "failed"] in ([13], [1])
    assert store._writer.batches < store._writer.jobs, "group commit: fewer commits than writes"


@pytest.mark.asyncio
async def test_write_after_close_is_refused(tmp_path: Path) -> None:
    from daemon.store.writer import WriterClosed

    url = f"sqlite:///{tmp_path}/c.db"
    upgrade(url)
    store = Store(url)
    store.start()
    store.close()
    with pytest.raises(WriterClosed):
        await store.write(lambda tx: None)


@pytest.mark.asyncio
async def test_a_new_database_is_private_whatever_the_umask(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/data/cambium.db"
    previous = os.umask(0o022)
    try:
        upgrade(url)
        store = Store(url)
        store.start()
        try:
            await store.write(lambda tx: tx.connection.execute(text("CREATE TABLE t (n INT)")))
            files = sorted((tmp_path / "data").iterdir())
            assert [f.name for f in files] == ["cambium.db", "cambium.db-shm", "cambium.db-wal"]
            assert {f.name: f.stat().st_mode & 0o777 for f in files} == dict.fromkeys(
                (f.name for f in files), 0o600
            )
            assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700
        finally:
            store.close()
    finally:
        os.umask(previous)
