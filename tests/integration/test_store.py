"""The store: migrations, SQLite durability settings, the group-committing writer."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import anyio
import anyio.to_thread
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from emitter_process import Counter, applied, create_applied_table
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import SQLModel
from support import FAST_RETRY, T0

from daemon.bus import DeliveryContext, Receptor, SignalBus
from daemon.core.signal import Signal
from daemon.store import (
    NewSignal,
    Store,
    StoreCorrupt,
    Stored,
    StoreLost,
    Tx,
    check_sqlite_file,
    writer,
)
from daemon.store.fast_path import advance_cursor
from daemon.store.migrate import current_revision, head_revision, upgrade
from daemon.store.writer import MAX_CONFLICT_RETRIES
from daemon.testing import drained


def test_migrations_reach_head_and_match_the_models(db_url: str) -> None:
    upgrade(db_url)
    assert current_revision(db_url) == head_revision() == "0013"
    upgrade(db_url)  # a second upgrade is a no-op
    engine = create_engine(db_url)
    with engine.connect() as connection:
        # What the models cannot say: FTS5's tables and PostgreSQL's generated tsvector.
        context = MigrationContext.configure(
            connection, opts={"include_name": lambda name, kind, _: not _engine_only(name, kind)}
        )
        diff = compare_metadata(context, SQLModel.metadata)
    engine.dispose()
    assert diff == [], "models and migrations disagree"


def _engine_only(name: str | None, kind: str) -> bool:
    return (kind == "table" and (name or "").startswith(("text_fts_", "text_vocab_"))) or (
        name in ("tsv", "ix_text_rows_tsv")
    )


def test_sqlite_is_wal_with_a_busy_timeout(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/c.db"
    upgrade(url)
    store = Store(url)
    try:
        with store._writer.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
    finally:
        store.close()


def test_a_just_migrated_file_is_in_wal_before_the_writer_connects(tmp_path: Path) -> None:
    """The migrations leave a new file in rollback-journal mode: if the writer's and a
    reader's first connections both switched it, one could fail at once with "database is
    locked" (a daemon's first start, a test's store)."""
    url = f"sqlite:///{tmp_path}/c.db"
    upgrade(url)
    with closing(sqlite3.connect(tmp_path / "c.db")) as before:
        assert before.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    store = Store(url)
    store.start()
    try:
        assert store._reader.pool.checkedin() == 0  # no reader has connected yet
        with closing(sqlite3.connect(tmp_path / "c.db")) as after:
            assert after.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        store.close()


def durable_in_effect(tx: Tx) -> bool:
    """Whether the transaction open in ``tx`` will commit durably, read inside it."""
    return commits_durably(tx.connection.connection.driver_connection, tx.connection.dialect.name)


@pytest.mark.asyncio
async def test_each_write_commits_as_durably_as_it_asked(store: Store) -> None:
    # The writer switches SQLite's synchronous setting per batch, and PostgreSQL's
    # synchronous_commit per transaction: read what is in effect inside each transaction.
    assert await store.write(durable_in_effect) is True
    assert await store.write(durable_in_effect, durable=False) is False
    assert await store.write(durable_in_effect) is True, "a durable write after a relaxed one"
    assert await store.write(durable_in_effect, durable=False) is False


@pytest.mark.asyncio
async def test_relaxed_work_batched_with_an_emit_commits_durably(store: Store) -> None:
    """One transaction, one commit: if any of its work must be durable, all of it is."""
    entered, release = threading.Event(), threading.Event()

    def hold_the_writer(tx: Tx) -> None:
        entered.set()
        release.wait(10)

    held = asyncio.create_task(store.write(hold_the_writer))
    assert await anyio.to_thread.run_sync(entered.wait, 10)
    relaxed = asyncio.create_task(store.write(durable_in_effect, durable=False))
    emit = asyncio.create_task(store.write_batched(append_signals, NewSignal(ping(), T0)))
    await asyncio.sleep(0)  # each task runs up to its wait: both are submitted
    await asyncio.sleep(0)  # and handed to the writer together, at the end of that turn
    assert store._writer._queue.qsize() == 1
    release.set()
    await held
    assert await relaxed is True
    assert not (await emit).duplicate
    assert store._writer.batches == 2


@pytest.mark.asyncio
async def test_every_acknowledged_emit_commits_durably_with_its_effect(store: Store) -> None:
    """Each emit acknowledged by the bus is one commit with synchronous=FULL (PostgreSQL:
    synchronous_commit on) in effect, and a store receptor with nothing older to deliver
    writes its effect in that same commit: acknowledged means applied."""
    create_applied_table(store)
    spy = CommitSpy(store._writer.engine)
    async with SignalBus(store, [Counter()]) as bus:
        for n in range(12):
            stored = await bus.emit(ping(n))
            assert stored.id in applied(store), "applied before the emit returns"
    spy.detach()
    emits = [c for c in spy.commits if c.appended]
    assert [(c.appended, c.durable) for c in emits] == [(1, True)] * 12
    applications = [c for c in spy.commits if "INSERT INTO test_applied" in c.statements]
    assert all(c.appended for c in applications), "every effect committed with its emit"
    assert len(applied(store)) == 12


class LoneCounter(Counter):
    """A store receptor whose backlog is a single signal: delivered through the context's
    commit rather than as a batch."""

    key: ClassVar[str] = "lone"
    binds: ClassVar[frozenset[str]] = frozenset({"test.lone"})


class FailsFirst(Receptor):
    """Fails its first attempt; then returns without committing (the bus marks it done)."""

    key: ClassVar[str] = "fails_first"
    binds: ClassVar[frozenset[str]] = frozenset({"test.fails_first"})

    def __init__(self) -> None:
        self.attempts: list[int] = []

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        self.attempts.append(delivery.attempt)
        if delivery.attempt == 1:
            raise RuntimeError("not yet")


@pytest.mark.asyncio
async def test_what_a_worker_commits_does_not_wait_for_fsync(store: Store) -> None:
    """A backlog applied in a batch, a single delivery committed with its effect, a failure
    recorded, a delivery marked done: a power loss may undo any of them together with the
    cursor's move, and the signal is delivered again, so none waits for fsync. (Emits do:
    see the test above.) Everything is stored before the bus starts, so no emit shares a
    commit with the workers' work."""
    create_applied_table(store)
    fails_first = FailsFirst()
    receptors = [Counter(), LoneCounter(), fails_first]
    for receptor in receptors:
        store.write_sync(lambda tx, r=receptor: tx.signals.register(r.key, r.binds, T0))
    backlog = [ping(n) for n in range(3)] + [
        ping(3).model_copy(update={"type": "test.lone"}),
        ping(4).model_copy(update={"type": "test.fails_first"}),
    ]
    for one in backlog:
        await store.write_batched(append_signals, NewSignal(one, T0))
    spy = CommitSpy(store._writer.engine)
    async with SignalBus(store, receptors, retry=FAST_RETRY) as bus:
        with anyio.fail_after(10):
            await drained(bus)
    spy.detach()
    assert fails_first.attempts == [1, 2]
    assert sorted(applied(store)) == sorted(s.id for s in backlog[:4])
    durable = [c.statements for c in spy.commits if c.durable]
    # The cursors' registration at start, and on PostgreSQL the leases given up at close.
    assert len(durable) == (2 if store.dialect == "postgresql" else 1)
    assert all("receptor_cursors" in c and "test_applied" not in c for c in durable)
    relaxed = [c.statements for c in spy.commits if not c.durable]
    assert sum(c.count("INSERT INTO test_applied") for c in relaxed) == 4


class Commit(NamedTuple):
    statements: str  # what the transaction ran through SQLAlchemy, one statement a line
    durable: bool  # the setting in effect when it committed
    appended: int  # signals it added to the log


class CommitSpy:
    """Every commit on ``engine``'s connections: what it ran, and whether it was durable
    (read on the driver connection just before the database commits)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.commits: list[Commit] = []
        self._statements: list[str] = []
        with engine.connect() as connection:  # what the log held before
            self._head = log_head(connection.connection.driver_connection)
        event.listen(engine, "before_cursor_execute", self._executed)
        event.listen(engine, "commit", self._committed)

    def detach(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._executed)
        event.remove(self.engine, "commit", self._committed)

    def _executed(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if not statement.startswith(("BEGIN", "SET LOCAL")):
            self._statements.append(" ".join(statement.split()))

    def _committed(self, connection: Connection) -> None:
        driver = connection.connection.driver_connection
        durable = commits_durably(driver, connection.dialect.name)
        head = log_head(driver)
        appended, self._head = head - self._head, head
        self.commits.append(Commit("\n".join(self._statements), durable, appended))
        self._statements = []


def commits_durably(driver: Any, dialect: str) -> bool:
    """SQLite: synchronous FULL (2) or EXTRA (3) fsyncs the WAL at commit; PostgreSQL: any
    synchronous_commit but off waits for the local flush."""
    if dialect == "sqlite":
        return int(driver.execute("PRAGMA synchronous").fetchone()[0]) >= 2
    with driver.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return str(cursor.fetchone()[0]) != "off"


def log_head(driver: Any) -> int:
    """The log's last sequence number, read on the driver (the emit's insert bypasses
    SQLAlchemy's events)."""
    cursor = driver.cursor()
    cursor.execute("SELECT coalesce(max(seq), 0) FROM signals")
    head = int(cursor.fetchone()[0])
    cursor.close()
    return head


def append_signals(tx: Tx, new: Sequence[NewSignal]) -> list[Stored]:
    return tx.signals.append(new)


def ping(n: int = 0) -> Signal:
    return Signal.parse(
        {"type": "test.ping", "source_id": "tester", "payload": {"n": n}, "emitted_at": T0},
        now=T0,
    )


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
    assert store._writer.jobs >= 200, "every write counted (a failed batch's twice)"
    assert store._writer.batches < store._writer.jobs, "group commit: fewer commits than writes"


@pytest.mark.asyncio
async def test_a_lone_emit_is_committed_on_its_callers_thread_while_the_disk_is_quick(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite, an emit alone in its turn of the event loop, with the writer idle, is
    committed right there (two thread hand-overs saved) once a durable commit has shown the
    disk quick; emits that come together still share the writer's transaction, a job never
    runs on the loop (it may wait on anything), and after a slow commit nothing does."""
    threads: list[str] = []

    def append(tx: Tx, new: Sequence[NewSignal]) -> list[Stored]:
        threads.append(threading.current_thread().name)
        return tx.signals.append(new)

    # The writer lingers after waking its callers, as a thread may when the GIL passes: the
    # caller's next emit must still find the writer idle.
    loop = asyncio.get_running_loop()
    wake = loop.call_soon_threadsafe

    def wake_then_linger(*args: Any) -> Any:
        handle = wake(*args)
        if threading.current_thread().name == "cambium-writer":
            time.sleep(0.05)
        return handle

    monkeypatch.setattr(loop, "call_soon_threadsafe", wake_then_linger)
    monkeypatch.setattr(writer, "COMMIT_HERE_SECONDS", 60.0)
    here = "MainThread" if store.dialect == "sqlite" else "cambium-writer"
    await store.write_batched(append, NewSignal(ping(0), T0))  # no commit timed yet
    await store.write_batched(append, NewSignal(ping(1), T0))
    assert threads == ["cambium-writer", here]
    batches = store._writer.batches
    await asyncio.gather(*(store.write_batched(append, NewSignal(ping(n), T0)) for n in (2, 3)))
    assert threads[2:] == ["cambium-writer"] and store._writer.batches == batches + 1
    await store.write(lambda tx: threads.append(threading.current_thread().name))
    assert threads[3:] == ["cambium-writer"]
    monkeypatch.setattr(writer, "COMMIT_HERE_SECONDS", 0.0)
    await store.write_batched(append, NewSignal(ping(4), T0))
    assert threads[4:] == ["cambium-writer"]
    stored = store.read_sync(
        lambda tx: tx.connection.execute(text("SELECT count(*) FROM signals")).scalar_one()
    )
    assert stored == 5


@pytest.mark.asyncio
async def test_more_writes_than_a_batch_holds_are_all_committed(store: Store) -> None:
    """A full batch is committed and the writer goes on: it stops only when told to."""
    store.write_sync(lambda tx: tx.connection.execute(text("CREATE TABLE t (n INTEGER)")))
    writes = 2 * store._writer.max_batch + 100

    async def insert(n: int) -> None:
        await store.write(
            lambda tx: tx.connection.execute(text("INSERT INTO t VALUES (:n)"), {"n": n}),
            durable=False,
        )

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for n in range(writes):
                tg.start_soon(insert, n)
    with anyio.fail_after(10):
        await insert(-1)  # the writer is still there after a batch it filled
    count = store.read_sync(
        lambda tx: tx.connection.execute(text("SELECT count(*) FROM t")).scalar_one()
    )
    assert count == writes + 1


def test_the_writer_stops_without_an_error_in_its_thread(tmp_path: Path) -> None:
    upgrade(f"sqlite:///{tmp_path / 'c.db'}")
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    store.start()
    failures: list[threading.ExceptHookArgs] = []
    previous, threading.excepthook = threading.excepthook, failures.append
    try:
        store.close()
    finally:
        threading.excepthook = previous
    assert failures == []


@pytest.mark.asyncio
async def test_a_write_submitted_while_the_writer_stops_is_refused_not_stranded(
    store: Store,
) -> None:
    """Stopping finishes what is queued; anything submitted once the stop has begun is
    refused at once (WriterClosed), never queued behind the stop to wait forever."""
    from daemon.store import WriterClosed

    entered, release = threading.Event(), threading.Event()

    def hold_the_writer(tx: Tx) -> str:
        entered.set()
        release.wait(10)
        return "finished"

    held = asyncio.create_task(store.write(hold_the_writer))
    assert await anyio.to_thread.run_sync(entered.wait, 10)
    stopping = threading.Thread(target=store._writer.stop)
    stopping.start()
    with anyio.fail_after(5):
        while not store._writer._closed:  # noqa: ASYNC110 (the writer has no event for it)
            await asyncio.sleep(0.001)
    with anyio.fail_after(5), pytest.raises(WriterClosed):
        await store.write(lambda tx: None)
    release.set()
    assert await held == "finished", "what was queued before the stop is finished"
    await anyio.to_thread.run_sync(stopping.join, 10)
    assert not store.writer_alive


@pytest.mark.asyncio
async def test_write_after_close_is_refused(tmp_path: Path) -> None:
    from daemon.store import WriterClosed

    url = f"sqlite:///{tmp_path}/c.db"
    upgrade(url)
    store = Store(url)
    store.start()
    assert store.writer_alive
    store.close()
    assert not store.writer_alive
    with pytest.raises(WriterClosed):
        await store.write(lambda tx: None)


@pytest.mark.asyncio
async def test_a_deleted_database_file_refuses_every_write(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/c.db"
    upgrade(url)
    store = Store(url)
    store.start()
    try:
        await store.write(lambda tx: tx.connection.execute(text("SELECT 1")))  # connected
        (tmp_path / "c.db").unlink()
        with pytest.raises(StoreLost, match="was deleted"):
            await store.write(lambda tx: tx.connection.execute(text("SELECT 1")))
        assert store.lost
    finally:
        store.close()


@pytest.mark.asyncio
async def test_a_new_database_is_private_whatever_the_umask(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/home/data/cambium.db"  # neither directory exists yet
    previous = os.umask(0o022)
    try:
        upgrade(url)
        store = Store(url)
        store.start()
        try:
            await store.write(lambda tx: tx.connection.execute(text("CREATE TABLE t (n INT)")))
            files = sorted((tmp_path / "home" / "data").iterdir())
            assert [f.name for f in files] == ["cambium.db", "cambium.db-shm", "cambium.db-wal"]
            assert {f.name: f.stat().st_mode & 0o777 for f in files} == dict.fromkeys(
                (f.name for f in files), 0o600
            )
            assert (tmp_path / "home" / "data").stat().st_mode & 0o777 == 0o700
        finally:
            store.close()
    finally:
        os.umask(previous)


def test_a_store_in_memory_leaves_no_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = Store("sqlite:///:memory:")
    store.start()
    try:
        store.write_sync(lambda tx: tx.connection.execute(text("CREATE TABLE t (n INT)")))
    finally:
        store.close()
    assert list(tmp_path.iterdir()) == [], "no file named after the database in memory"


def test_a_sqlite_file_is_checked_before_the_daemon_uses_it(tmp_path: Path) -> None:
    database = tmp_path / "cambium.db"
    url = f"sqlite:///{database}"
    check_sqlite_file(url)  # missing: a new store will be made
    database.write_bytes(b"")
    check_sqlite_file(url)  # empty: the same
    check_sqlite_file("postgresql+psycopg://nobody@127.0.0.1:1/none")  # not a file to check

    with closing(sqlite3.connect(database)) as connection:
        connection.execute("CREATE TABLE t (body TEXT)")
        connection.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 400)
        connection.execute("CREATE INDEX ix_t ON t (body)")
        connection.commit()
    check_sqlite_file(url)

    data = bytearray(database.read_bytes())
    page = 4096
    middle = len(data) // page // 2 * page
    data[middle : middle + page] = b"\xa5" * page  # scribble over a whole b-tree page
    database.write_bytes(bytes(data))
    with pytest.raises(StoreCorrupt, match=r"(?s)is corrupt \(.+\); restore it from a backup"):
        check_sqlite_file(url)

    database.write_bytes(b"this is not SQLite, just some text\n" * 200)
    with pytest.raises(StoreCorrupt, match="is not a usable SQLite database"):
        check_sqlite_file(url)


class _DriverError(Exception):
    """What psycopg raises, as far as the writer looks: an error with an SQLSTATE."""

    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"SQLSTATE {sqlstate}")
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("sqlstate", "runs"),
    [("40P01", 2), ("40001", 2), ("23505", 1)],
    ids=["deadlock", "serialization", "unique"],
)
@pytest.mark.asyncio
async def test_a_deadlock_victim_is_run_again_and_other_errors_are_not(
    store: Store, sqlstate: str, runs: int
) -> None:
    """PostgreSQL rolls a deadlock's or a serialisation conflict's victim back whole, so
    the writer runs it again; any other error goes to the caller after one run."""
    tries: list[int] = []

    def job(tx: Tx) -> str:
        tries.append(1)
        if len(tries) == 1:
            raise OperationalError("UPDATE t", {}, _DriverError(sqlstate))
        return "done"

    if runs == 1:
        with pytest.raises(OperationalError, match=sqlstate):
            await store.write(job)
    else:
        assert await store.write(job) == "done"
    assert len(tries) == runs


@pytest.mark.asyncio
async def test_a_victim_is_run_again_three_times_at_most(store: Store) -> None:
    tries: list[int] = []

    def job(tx: Tx) -> None:
        tries.append(1)
        raise OperationalError("UPDATE t", {}, _DriverError("40P01"))

    with pytest.raises(OperationalError):
        await store.write(job)
    assert len(tries) == 1 + MAX_CONFLICT_RETRIES


def test_the_writers_thread_is_named_for_an_operator(store: Store) -> None:
    """``top -H`` and ``py-spy dump`` show which thread is the store's writer."""
    assert "cambium-writer" in [thread.name for thread in threading.enumerate()]


def test_a_process_that_never_closed_its_store_still_exits(tmp_path: Path) -> None:
    """The writer's thread does not keep a process alive: a command that opened the store
    and failed before closing it exits all the same, instead of hanging at its exit."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    upgrade(url)
    program = f"from daemon.store import Store\nStore({url!r}).start()\nprint('started')\n"
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=30
    )
    assert (done.returncode, done.stdout) == (0, "started\n")


@pytest.mark.asyncio
async def test_the_writer_sets_sqlites_durability_only_when_it_changes(
    tmp_path: Path,
) -> None:
    """One PRAGMA when a batch's durability differs from the last one's, none per commit."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    upgrade(url)
    store = Store(url)
    pragmas: list[str] = []

    @event.listens_for(store._writer.engine, "connect")
    def trace(dbapi_connection: Any, _: Any) -> None:
        dbapi_connection.set_trace_callback(
            lambda sql: pragmas.append(sql) if sql.startswith("PRAGMA synchronous=") else None
        )

    store.start()
    try:
        for durable in (True, True, True, False, False, True):
            assert await store.write(durable_in_effect, durable=durable) is durable
    finally:
        store.close()
    full, normal = "PRAGMA synchronous=FULL", "PRAGMA synchronous=NORMAL"
    assert pragmas == [full, normal, full]


def refuse_writes(store: Store, statement: str, table: str) -> None:
    """A trigger that makes the driver refuse every ``statement`` (INSERT, UPDATE) of
    ``table`` with a constraint error saying "refused"."""
    refuse = (
        f"CREATE TRIGGER refuse BEFORE {statement} ON {table}"
        " BEGIN SELECT RAISE(ABORT, 'refused'); END"
        if store.dialect == "sqlite"
        else "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = 'check_violation'; END $$;"
        f" CREATE TRIGGER refuse BEFORE {statement} ON {table}"
        " FOR EACH ROW EXECUTE FUNCTION refuse()"
    )
    store.write_sync(lambda tx: tx.connection.exec_driver_sql(refuse))


@pytest.mark.asyncio
async def test_a_driver_error_on_an_emits_insert_is_raised_as_sqlalchemys(store: Store) -> None:
    """The emit's insert goes straight to the driver; its errors still come as SQLAlchemy's
    (what the writer's retry and the API's 503 tell apart), naming the statement."""
    refuse_writes(store, "INSERT", "signals")
    with pytest.raises(IntegrityError) as raised:
        await store.write_batched(append_signals, NewSignal(ping(), T0))
    assert raised.value.statement == "INSERT INTO signals"
    assert "refused" in str(raised.value.orig)


def test_a_driver_error_on_a_cursors_move_is_raised_as_sqlalchemys(store: Store) -> None:
    """So are those of the other statements the bus runs on the driver (cursors, savepoints,
    SQLite's BEGIN and COMMIT)."""
    store.write_sync(lambda tx: tx.signals.register("r", {"test.ping"}, T0))
    refuse_writes(store, "UPDATE", "receptor_cursors")
    with pytest.raises(IntegrityError) as raised:
        store.write_sync(lambda tx: advance_cursor(tx.connection, "r", 0, 1, T0))
    assert raised.value.statement.startswith("UPDATE receptor_cursors SET position")
    assert "refused" in str(raised.value.orig)


def test_the_writer_outlives_a_caller_whose_event_loop_closed(store: Store) -> None:
    """A caller gave up and its event loop is gone when the answer comes: the writer drops
    that answer and goes on writing for everyone else."""
    entered, release = threading.Event(), threading.Event()

    def held(tx: Tx) -> None:
        entered.set()
        assert release.wait(10)

    gone = asyncio.new_event_loop()
    waiting = gone.create_task(store.write(held))
    gone.run_until_complete(asyncio.sleep(0.01))  # submitted and handed to the writer
    assert entered.wait(10)
    waiting.cancel()
    gone.run_until_complete(asyncio.sleep(0))
    gone.close()
    release.set()

    async def write_again() -> int:
        with anyio.fail_after(10):
            return await store.write(lambda tx: 1)

    assert anyio.run(write_again) == 1
