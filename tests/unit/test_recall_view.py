"""The CLI's text view of a recall is drawn from the daemon's JSON: with ``explain``, each
mark's strength and how it got there; from a daemon that does not explain (older than the
CLI), what it said, without failing."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from daemon.cli.render import recall_view

MARK: dict[str, Any] = {
    "id": "mk_1",
    "subject": "user.food",
    "observation": "likes lentil soup",
    "current_strength": 0.55,
    "state": "active",
    "observed_by": "agent",
    "first_observed_at": "2026-04-01T10:00:00Z",
    "last_reinforced_at": "2026-04-05T10:00:00Z",
    "reinforcement_count": 1,
    "provenance": "observed",
    "evidence": {"note": "said so"},
}
EXPLAINED = MARK | {
    "supersedes": "mk_0",
    "superseded_by": None,
    "ended_at": None,
    "ended_reason": None,
    "strength": {
        "value": 0.55,
        "initial": 0.7,
        "half_life_days": 14.0,
        "age_days": 10.0,
        "base": 0.43,
        "reinforcements": [{"at": "2026-04-05T10:00:00Z", "delta": 0.2, "now": 0.12}],
    },
}


def text(mark: dict[str, Any]) -> str:
    answer = {"substrate": [], "marks": [mark], "daily": [], "compost": [], "summary": None}
    console = Console(width=200, record=True, file=None)
    with console.capture() as captured:
        console.print(recall_view(answer, ["marks"]))
    return captured.get()


def test_an_explained_mark_shows_how_its_strength_got_there() -> None:
    shown = text(EXPLAINED)
    assert "user.food — likes lentil soup" in shown
    assert "corrects" in shown and "mk_0" in shown
    assert "from 0.70 initial, 10.00 days old, half-life 14 days" in shown
    # Outside a command no zone is configured: times read in UTC, labelled.
    assert "from +0.20 reinforced 2026-04-05 10:00:00 UTC, 6.00 days old" in shown
    assert "substrate" not in shown  # only the layers asked for


def test_a_mark_from_a_daemon_that_does_not_explain_shows_its_strength_now() -> None:
    shown = text(MARK)
    assert "0.55  now" in shown and "initial" not in shown
