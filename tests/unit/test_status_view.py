"""``cambium status`` drawn from the daemon's health: a line about the index only while the
start is preparing it, and nothing from a daemon that does not say (older than the CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from daemon.cli.render import status_view

HEALTH: dict[str, Any] = {
    "status": "ok",
    "version": "0.1.0",
    "uptime_seconds": 12.5,
    "workspace": "default",
    "receptors": [{"key": "observation", "binds": ["memory.observation"], "owned": True}],
    "deliveries": {"pending": 0, "dead": 0},
    "rhythms": {},
    "substrate": {"watched_files": []},
}


def shown(health: dict[str, Any]) -> str:
    console = Console(width=120, record=True)
    console.print(status_view(health, Path("/run/cambium.sock")))
    return console.export_text()


def test_the_index_is_mentioned_only_while_it_is_prepared() -> None:
    preparing = shown(HEALTH | {"index": "preparing"})
    assert "preparing: recall answers from what is indexed so far" in preparing
    assert "preparing" not in shown(HEALTH | {"index": "ready"})
    assert "preparing" not in shown(HEALTH)  # an older daemon
