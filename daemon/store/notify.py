"""Wake-ups across a fleet: an append on PostgreSQL that leaves work for a worker is announced
with NOTIFY when it commits (:meth:`~daemon.store.signals.SignalLog.announce_append`);
:func:`listen_for_appends` hears them on a connection of its own."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import structlog
from sqlalchemy.engine import make_url

from daemon.store.fast_path import APPENDED_CHANNEL

log = structlog.get_logger("cambium.notify")


async def listen_for_appends(url: str, on_append: Callable[[], None]) -> None:
    """Call ``on_append`` whenever a daemon on the PostgreSQL store at ``url`` appends to the
    log, until cancelled. Notifications that arrive together call it once."""
    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as connection:
        await connection.execute(f"LISTEN {APPENDED_CHANNEL}")
        log.info("listening for appends", channel=APPENDED_CHANNEL)
        async for _ in connection.notifies():
            on_append()
