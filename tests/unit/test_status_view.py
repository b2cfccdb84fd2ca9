"""``cambium status`` drawn from the daemon's health: a line about the index only while the
start is preparing it, and nothing from a daemon that does not say (older than the CLI);
the first few substrate files, and how many more."""

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
    assert "preparing; recall answers from what is indexed so far" in preparing
    assert "preparing" not in shown(HEALTH | {"index": "ready"})
    assert "preparing" not in shown(HEALTH)  # an older daemon
    at = {"layer": "daily", "done": 412, "total": 1098}
    assert (
        "preparing, daily files 412 of 1,098 looked at; recall answers from what is indexed"
        in shown(HEALTH | {"index": "preparing", "preparation": at})
    )
    marks = {"layer": "marks", "done": 0, "total": 0}
    assert "preparing, marks; recall" in shown(
        HEALTH | {"index": "preparing", "preparation": marks}
    )
    marks |= {"done": 1000, "total": 100_000}
    assert "preparing, marks 1,000 of 100,000 indexed; recall" in shown(
        HEALTH | {"index": "preparing", "preparation": marks}
    )


def test_a_vault_of_notes_is_counted_not_listed_whole() -> None:
    files = [f"/notes/note-{n:03d}.md" for n in range(100)]
    text = shown(HEALTH | {"substrate": {"watched_files": files}})
    assert "100 watched files" in text
    assert "/notes/note-004.md" in text and "/notes/note-005.md" not in text
    assert "… and 95 more (cambium memory substrate)" in text
    assert len(text.splitlines()) < 20
    one = shown(HEALTH | {"substrate": {"watched_files": files[:1]}})
    assert "1 watched file " in one and "/notes/note-000.md" in one and "more" not in one
