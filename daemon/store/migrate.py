"""Schema migrations (Alembic), applied by ``cambium db upgrade`` and at daemon start.

Each revision is applied in one transaction (see ``migrations/env.py``): a crash at any
point leaves the store at a revision, and the next upgrade resumes from it.

Alembic is imported inside the functions that use it: the daemon runs migrations in a
short-lived child process (:func:`upgrade_in_child_process`), so Alembic and Mako never
occupy the long-running daemon's memory (about 10 MB)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import SQLAlchemyError

from daemon.sdnotify import notify
from daemon.store.failure import describe_failure

if TYPE_CHECKING:
    from alembic.config import Config
    from anyio.abc import ByteReceiveStream

MIGRATIONS = Path(__file__).with_name("migrations")
# While migrating under systemd, the start timeout is pushed this far ahead, this often.
EXTEND_EVERY_SECONDS = 10.0
EXTEND_BY_SECONDS = 30.0

log = structlog.get_logger("cambium.migrate")


class MigrationFailed(RuntimeError):
    """The schema could not be brought up to date; the message is the migration's error."""


def alembic_config(url: str, progress: Callable[[str], None] | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["progress"] = progress
    return config


def upgrade(
    url: str, revision: str = "head", progress: Callable[[str], None] | None = None
) -> None:
    """Bring the database at ``url`` to ``revision``; a no-op when it is already there.
    ``progress`` is told each revision as it is applied."""
    from alembic import command

    from daemon.store.engine import make_engine
    from daemon.store.lock import migration_lock

    # A writer's engine creates a new SQLite file private to the user (0600).
    make_engine(url, writer=True).dispose()
    with migration_lock(url):  # a fleet's daemons may start together
        command.upgrade(alembic_config(url, progress), revision)


async def upgrade_in_child_process(url: str) -> None:
    """:func:`upgrade` to head in a child process. The URL goes through stdin, not argv:
    a PostgreSQL URL may hold a password, and every user can read argv. The child's
    progress is logged; under systemd the start timeout is extended while it runs (from
    this process: the unit accepts notifications from the main process only)."""
    async with await anyio.open_process(
        [sys.executable, "-m", "daemon.store.migrate"], stdout=subprocess.DEVNULL
    ) as child:
        assert child.stdin is not None and child.stderr is not None
        await child.stdin.send(url.encode())
        await child.stdin.aclose()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_extend_start_timeout)
            last = await _log_lines(child.stderr)
            returncode = await child.wait()
            tasks.cancel_scope.cancel()
    if returncode != 0:
        raise MigrationFailed(f"migrations failed: {last or 'no output'}")
    if last:
        log.info("migration", progress=last)


async def _extend_start_timeout() -> None:
    while notify(f"EXTEND_TIMEOUT_USEC={int(EXTEND_BY_SECONDS * 1_000_000)}"):
        notify("STATUS=migrating the store")
        await anyio.sleep(EXTEND_EVERY_SECONDS)


async def _log_lines(stream: ByteReceiveStream) -> str:
    """Log each line the child writes as progress but the last, which is returned: it is
    the error if the child fails."""
    buffer, last = b"", ""
    async for chunk in stream:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in filter(None, (raw.decode(errors="replace").strip() for raw in lines)):
            if last:
                log.info("migration", progress=last)
            last = line
    tail = buffer.decode(errors="replace").strip()
    if tail and last:
        log.info("migration", progress=last)
    return tail or last


# The newest revision. Read commands compare the store's revision with it without importing
# Alembic and reading every migration (a fifth of a second); a test keeps it Alembic's head.
HEAD = "0013"


def current_revision(url: str) -> str | None:
    """The store's revision, ``None`` before the first migration (read with plain SQL)."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table("alembic_version"):
                return None
            return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        engine.dispose()


def head_revision() -> str:
    return HEAD


def alembic_head() -> str | None:
    """The head as Alembic finds it from the migration scripts."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def main() -> None:
    """The child process: upgrade the store whose URL is on stdin; progress and the one
    line of a failure on stderr (and exit 1)."""
    from alembic.util import CommandError

    url = sys.stdin.read().strip()
    try:
        upgrade(url, progress=lambda line: print(line, file=sys.stderr, flush=True))
    except (SQLAlchemyError, CommandError, OSError) as exc:
        print(describe_failure(url, exc), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
