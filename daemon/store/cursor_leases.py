"""Leases on the receptors' cursor rows (``owner`` until ``lease_until``): how a fleet of
daemons sharing one PostgreSQL store takes turns at each receptor. These are the rows;
who asks for which lease and when is :mod:`daemon.bus.leases`."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, update
from sqlalchemy.engine import Connection

from daemon.store.cursors import cursors


class CursorLeases:
    """Every operation on the cursors' leases, inside the transaction of ``connection``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def take_lease(self, receptor: str, owner: str, now: datetime, until: datetime) -> bool:
        """Own ``receptor`` until ``until``: renew a lease ``owner`` holds, or take one that
        is free or expired. False if another owner holds it."""
        result = self.connection.execute(
            update(cursors)
            .where(
                cursors.c.receptor == receptor,
                or_(
                    cursors.c.owner.is_(None),
                    cursors.c.owner == owner,
                    cursors.c.lease_until < now,
                ),
            )
            .values(owner=owner, lease_until=until)
        )
        return result.rowcount == 1

    def release_leases(self, owner: str) -> None:
        """Give up every lease ``owner`` holds (at a clean stop: others take over at once)."""
        self.connection.execute(
            update(cursors).where(cursors.c.owner == owner).values(owner=None, lease_until=None)
        )
