"""Every command that prints a result takes ``--json``, and its output parses: the write
commands run against a real daemon, each with ``--json``, their stdout ``json.loads``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from support import commands

from daemon.cli.main import cli
from daemon.testing import DaemonHome, running

# Servers, and a script for the shell: nothing to print as JSON. (`db upgrade` is still
# owed its --json: it lives in main.py, restructured elsewhere at the time.)
NO_RESULT = {"run", "loom", "mcp", "completion", "db upgrade"}


def runnable(group: click.Group) -> list[tuple[str, click.Command]]:
    return [
        (name, command)
        for name, command in commands(group)
        if not isinstance(command, click.Group) or command.invoke_without_command
    ]


def test_every_command_that_prints_a_result_takes_json() -> None:
    lacking = [
        name
        for name, command in runnable(cli)
        if name not in NO_RESULT and "as_json" not in {p.name for p in command.params}
    ]
    assert lacking == []


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DaemonHome:
    monkeypatch.setenv("LOGNAME", "ada")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return DaemonHome(tmp_path)


def as_json(home: DaemonHome, *args: str, code: int = 0) -> Any:
    result = home.cli(*args, "--json")
    assert result.returncode == code, f"cambium {' '.join(args)}:\n{result.stderr}"
    return json.loads(result.stdout)


@pytest.mark.subprocess
def test_the_write_commands_print_json(home: DaemonHome) -> None:
    home.extra_config = "max_attempts = 1\n"  # a failed delivery is dead at once
    home.write_config()
    daily = home.root / "memory/daily"
    with running(home):
        mark = as_json(home, "memory", "mark", "user.coffee", "takes coffee black")
        assert mark["subject"] == "user.coffee" and mark["id"].startswith("mk_")
        noted = as_json(
            home, "memory", "note", "OBS subject=user.tea green", "--date", "2026-01-15"
        )
        assert noted["path"] == str(daily / "2026-01-15.md")
        done = as_json(home, "memory", "consolidate", "--date", "2026-01-15")
        assert done["outcome"] == "consolidated" and done["archived"].endswith("2026-01-15.md")
        again = as_json(home, "memory", "consolidate", "--date", "2026-01-15")
        assert again["outcome"] == "already consolidated"
        for day in ("2026-01-17", "2026-01-16", "2026-01-19"):
            as_json(home, "memory", "note", f"OBS subject=user.day{day[-2:]} x", "--date", day)
        through = as_json(home, "memory", "consolidate", "--through", "2026-01-18")
        assert [(d["date"], d["outcome"]) for d in through] == [
            ("2026-01-16", "consolidated"),
            ("2026-01-17", "consolidated"),
        ]  # oldest first; the 19th is after --through and stays live
        assert (daily / "2026-01-19.md").exists()

        seed = {"subject": "user.coffee", "proposed_change": "Add: black coffee",
                "target_file": "USER.md", "based_on_marks": [mark["id"]]}  # fmt: skip
        for change in ("Add: black coffee", "Add: no sugar"):
            payload = json.dumps(seed | {"proposed_change": change})
            planted = home.cli(
                "emit", "memory.seed_planted", "--source-id", "gardener", "--payload", payload
            )
            assert planted.returncode == 0, planted.stderr
        first, second = (s["id"] for s in as_json(home, "memory", "seeds"))
        assert as_json(home, "memory", "seeds", "accept", first)["state"] == "accepted"
        assert as_json(home, "memory", "seeds", "undo", first)["state"] == "pending"
        assert as_json(home, "memory", "seeds", "reject", second)["state"] == "rejected"

        daily.rename(home.root / "away")
        daily.write_text("")  # a file where the directory should be: the note's delivery dies
        assert home.cli("memory", "note", "lost", "--date", "2026-01-16").returncode == 1
        [dead] = [s["id"] for s in as_json(home, "signals", "--status", "dead")]
        retried = as_json(home, "signals", "retry", dead, code=1)  # dead again, and says so
        assert retried["deliveries"] == {"daily": "dead"}
        discarded = as_json(home, "signals", "discard", dead)
        assert discarded["applied"] is True


@pytest.mark.subprocess
def test_init_and_service_install_print_json(home: DaemonHome, tmp_path: Path) -> None:
    made = as_json(home, "init", str(tmp_path / "fresh"), "--llm", "none")
    assert made["config"] == str(tmp_path / "fresh" / "cambium.toml")
    assert made["next"][0] == f"cambium run --config {made['config']}"
    installed = as_json(home, "service", "install")
    assert installed["started"] is False
    assert Path(installed["path"]).is_file()
