"""Schema migrations (Alembic), applied by ``cambium db upgrade`` and at daemon start.

Alembic is imported inside the functions that use it: the daemon runs migrations in a
short-lived child process (:func:`upgrade_in_child_process`), so Alembic and Mako never
occupy the long-running daemon's memory (about 10 MB)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from sqlalchemy import create_engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")


class MigrationFailed(RuntimeError):
    """The schema could not be brought up to date; the message is the migration's error."""


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision``; a no-op when it is already there."""
    from alembic import command

    from daemon.store.engine import make_engine
    from daemon.store.lock import migration_lock

    # A writer's engine creates a new SQLite file private to the user (0600).
    make_engine(url, writer=True).dispose()
    with migration_lock(url):  # a fleet's daemons may start together
        command.upgrade(alembic_config(url), revision)


async def upgrade_in_child_process(url: str) -> None:
    """:func:`upgrade` to head in a child process. The URL goes through stdin, not argv:
    a PostgreSQL URL may hold a password, and every user can read argv."""
    result = await anyio.run_process(
        [sys.executable, "-m", "daemon.store.migrate"], input=url.encode(), check=False
    )
    if result.returncode != 0:
        last = result.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise MigrationFailed(f"migrations failed: {' '.join(last) or 'no output'}")


def current_revision(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


if __name__ == "__main__":
    upgrade(sys.stdin.read().strip())
