"""Helpers shared by tests that drive receptors through a real bus."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, NoReturn

import anyio
import click

from daemon.bus import RetryPolicy, SignalBus
from daemon.core.signal import Signal
from daemon.files.daily import DailyLog
from daemon.store import Store

FAST_RETRY = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05)
T0 = datetime(2026, 4, 11, 10, 0, tzinfo=UTC)


def make_signal(signal_type: str, payload: dict[str, Any], **fields: Any) -> Signal:
    values: dict[str, Any] = {
        "type": signal_type,
        "source_id": "agent-observer",
        "payload": payload,
        "emitted_at": T0,
        "intensity": 0.8,
        "decay_rate": 7 * 86400,
    }
    return Signal.parse(values | fields, now=fields.get("emitted_at", T0))


async def emit_and_settle(bus: SignalBus, signal: Signal) -> dict[str, str]:
    stored = await bus.emit(signal)
    with anyio.fail_after(10):
        return await bus.settled(stored.id)


def last_error(store: Store, signal_id: str) -> str | None:
    found = store.read_sync(lambda tx: tx.signals.get(signal_id))
    assert found is not None
    return found.deliveries[0].last_error


def commands(group: click.Group, path: str = "") -> list[tuple[str, click.Command]]:
    """Every command under ``group`` with its full name ("memory seeds accept"), groups
    included; a lazy group loads each one as it is asked for."""
    found: list[tuple[str, click.Command]] = []
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None, name
        found.append((f"{path} {name}".strip(), command))
        if isinstance(command, click.Group):
            found += commands(command, f"{path} {name}")
    return found


def merge_half_done(daily: DailyLog, day: date, archived: str, claimed: str) -> Path:
    """The day's archive holds ``archived``, a claim holds ``claimed``, and the merge's
    record is written as a merge that then died would leave it; the archive's path."""
    daily.append(day, archived)
    daily.archive(day)
    daily.append(day, claimed)
    assert daily.claim(day) is not None
    archive = daily.path(day, archived=True)
    (archive.parent / f".{day.isoformat()}.md.merge").write_text(f"{archive.stat().st_size}\n")
    return archive


def refused_watch(*args: object, **kwargs: object) -> NoReturn:
    """``watchfiles.awatch`` where the system refuses a watch (its limit on watches or on
    watchers), as watchfiles says so."""
    raise OSError("OS file watch limit reached")
