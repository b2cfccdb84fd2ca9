"""When each rhythm was first scheduled: catch-up never fires slots from before it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from daemon.store.tables import RhythmStateTable

rhythm_state = RhythmStateTable.__table__  # type: ignore[attr-defined]


class RhythmState:
    """Every operation on the rhythm state, inside the transaction of ``connection``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def first_scheduled(self, names: list[str], now: datetime) -> dict[str, datetime]:
        """Each rhythm's ``first_scheduled_at``; rhythms never scheduled before get ``now``."""
        known = {
            row.name: row.first_scheduled_at
            for row in self.connection.execute(
                select(rhythm_state.c.name, rhythm_state.c.first_scheduled_at).where(
                    rhythm_state.c.name.in_(names)
                )
            )
        }
        new = [name for name in names if name not in known]
        if new:
            self.connection.execute(
                insert(rhythm_state), [{"name": name, "first_scheduled_at": now} for name in new]
            )
        return known | dict.fromkeys(new, now)
