"""A fleet: three daemons on one PostgreSQL database, four emitters spread over them, and the
daemon that owns the observation receptor killed (SIGKILL) twice mid-stream.

Any daemon accepts emits; the observation receptor is owned by one daemon at a time through
a lease, and taken over by another once the killed owner's lease runs out. At the end every
acknowledged signal is stored under its key and applied exactly once, and nothing is pending
or dead.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import ExitStack
from functools import partial
from pathlib import Path

import pytest
from sqlalchemy import select
from test_crash_recovery import (
    Database,
    Emitters,
    check_applied_once,
    check_the_end,
    wait_until,
)

from daemon.store import Store
from daemon.store.tables import ReceptorCursorTable
from daemon.testing import DaemonHome, running

pytestmark = pytest.mark.subprocess  # three `cambium` daemons and emitters

CURSORS = ReceptorCursorTable.__table__  # type: ignore[attr-defined]
COUNT = 600
LEASE = 2  # seconds: a killed owner's receptors are taken over within about this long


def owner_of(url: str, receptor: str) -> str | None:
    store = Store(url)
    try:
        owner = select(CURSORS.c.owner).where(CURSORS.c.receptor == receptor)
        return store.read_sync(lambda tx: tx.connection.execute(owner).scalar())
    finally:
        store.close()


def taken_over(url: str, killed: str) -> bool:
    return owner_of(url, "observation") not in (None, killed)


def home_of(homes: list[DaemonHome], owner: str) -> DaemonHome:
    """The daemon whose lease says ``owner`` (``host:pid``)."""
    pid = int(owner.rsplit(":", 1)[1])
    [found] = [h for h in homes if h.process is not None and h.process.pid == pid]
    return found


@pytest.fixture
def fleet(postgres_url: str, tmp_path: Path) -> Iterator[list[DaemonHome]]:
    homes = [
        DaemonHome(tmp_path / f"d{n}", db_url=postgres_url, extra_config=f"lease_seconds = {LEASE}")
        for n in range(3)
    ]
    with ExitStack() as stack:
        for home in homes:
            stack.enter_context(running(home))
        yield homes


def test_three_daemons_apply_every_acknowledged_signal_once_through_two_owner_kills(
    fleet: list[DaemonHome], postgres_url: str
) -> None:
    database = Database(postgres_url)
    emitters = Emitters(fleet, COUNT, run="fleet")
    emitters.start()

    for threshold in (COUNT // 4, COUNT // 2):
        wait_until(partial(emitters.at_least, threshold), f"{threshold} acknowledged")
        owner = owner_of(postgres_url, "observation")
        assert owner is not None, "some daemon owns the observation receptor"
        victim = home_of(fleet, owner)
        acknowledged = emitters.snapshot()
        assert victim.process is not None
        assert victim.stop(signal.SIGKILL) == -signal.SIGKILL
        # Another daemon takes the receptor over once the lease has run out...
        wait_until(
            partial(taken_over, postgres_url, owner),
            "the observation receptor taken over",
        )
        check_applied_once(database, acknowledged)
        victim.start()  # ...and the killed one comes back as an ordinary member
    check_the_end(database, emitters, fleet)
    owning = [
        home
        for home in fleet
        if {"key": "observation", "binds": ["memory.observation"], "owned": True}
        in home.get("/v1/health").json()["receptors"]
    ]
    assert len(owning) == 1, "one daemon says it owns the observation receptor"
