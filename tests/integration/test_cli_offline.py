"""The ``cambium`` commands that answer without a daemon (bad input, the files and the
store read directly, every command's help), through click's CliRunner: what is checked is
the command's output and exit code, not the process (tests/acceptance/test_cli.py runs the
installed command against the real daemon). Exit codes: 0 ok, 1 failed, 2 bad input."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from support import commands
from test_marks_store import insert, make_mark

from daemon.cli.main import cli
from daemon.config import CONFIG_ENV
from daemon.store import Store
from daemon.testing import DaemonHome


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DaemonHome:
    monkeypatch.setenv("COLUMNS", "120")
    return DaemonHome(tmp_path)


def invoke(home: DaemonHome, *args: str) -> click.testing.Result:
    result = CliRunner().invoke(cli, args, env={CONFIG_ENV: str(home.config)})
    # An answer, never a traceback: click's own exits are SystemExit.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


def ok(home: DaemonHome, *args: str) -> str:
    result = invoke(home, *args)
    assert result.exit_code == 0, f"cambium {' '.join(args)}:\n{result.stderr}{result.stdout}"
    return result.stdout


def fails(home: DaemonHome, code: int, *args: str) -> str:
    """Run a command that must exit ``code``; its message (stderr)."""
    result = invoke(home, *args)
    assert result.exit_code == code, (
        f"cambium {' '.join(args)}: {result.exit_code}\n{result.output}"
    )
    return result.stderr


def as_json(home: DaemonHome, *args: str) -> Any:
    return json.loads(ok(home, *args, "--json"))


def test_every_command_takes_config_and_its_help_has_an_example() -> None:
    runnable = [
        (name, command)
        for name, command in commands(cli)
        if not isinstance(command, click.Group) or command.invoke_without_command
    ]
    assert {name for name, _ in runnable} == {
        "run", "status", "emit", "db upgrade",
        "memory recall", "memory mark", "memory note", "memory consolidate",
        "memory seeds", "memory seeds accept", "memory seeds reject", "memory substrate",
        "signals", "signals show", "signals retry", "signals discard",
        "memory correct", "memory retract", "memory forget", "memory tombstones",
        "memory seeds undo", "export", "import",
        "loom",
        "mcp", "init", "service install", "service uninstall",
        "index check", "index rebuild",
        "config show", "doctor", "completion",
    }  # fmt: skip
    # init makes a config (in DIR), and uninstall removes a file whatever config made it.
    no_config = {"init", "service uninstall", "completion"}
    for name, command in runnable:
        takes_config = "config_path" in {p.name for p in command.params}
        assert takes_config == (name not in no_config), name
        assert "Example" in (command.help or ""), name


def test_bad_input_exits_2_with_a_message_even_with_the_daemon_down(home: DaemonHome) -> None:
    cases = {
        ("memory", "recall", "user", "--layers", "marks,dreams"): "--layers 'dreams'",
        ("memory", "recall", "user", "--horizon", "fortnight"): "--horizon 'fortnight'",
        ("memory", "recall", "user", "--min-strength", "1.5"): "--min-strength",
        ("memory", "note", "hello", "--date", "2026-02-30"): "invalid day '2026-02-30'",
        ("memory", "consolidate", "--date", "../x"): "invalid day '../x'",
        ("memory", "note", "two\nlines"): "one non-empty line",
        ("memory", "mark", "...", "an observation"): "bad SUBJECT",
        ("memory", "mark", "user.coffee"): "Missing argument 'OBSERVATION'",
        ("emit", "a.b", "--payload", "{nope", "--source-id", "x"): "bad --payload: not valid JSON",
        ("emit", "a.b", "--payload", "[1]", "--source-id", "x"): "payload: Input should be",
        ("emit", "Not-A-Type", "--payload", "{}", "--source-id", "x"): "type: String should",
        ("emit", "a.b", "--payload", "{}"): "Missing option '--source-id'",
        ("signals", "--status", "lost"): "'lost' is not one of",
        ("memory", "seeds", "accept"): "Missing argument 'ID'",
    }
    for args, message in cases.items():
        assert message in fails(home, 2, *args), args
    assert not (home.root / "cambium.db").exists(), "bad input touches nothing"


def test_read_commands_without_a_database_say_how_to_get_one(home: DaemonHome) -> None:
    for args in (["memory", "seeds"], ["signals"]):
        message = fails(home, 1, *args)
        assert "no database at" in message and "run `cambium db upgrade`" in message
    assert not (home.root / "cambium.db").exists(), "reading creates no database"
    assert "database at revision" in ok(home, "db", "upgrade")
    assert ok(home, "signals") == "no signals\n"
    assert as_json(home, "memory", "seeds") == []


def test_an_import_into_a_new_home_makes_its_database(home: DaemonHome, tmp_path: Path) -> None:
    """Restoring onto a new machine is `cambium init` and then `cambium import`: the import
    said "no database: run `cambium db upgrade`" instead of making it, as a start would."""
    other = DaemonHome(tmp_path / "old")
    assert other.cli("db", "upgrade").returncode == 0
    (other.root / "memory/daily/2026-11-30.md").write_text("lentil soup for lunch\n")
    assert other.cli("export", str(tmp_path / "memory.tar")).returncode == 0
    assert not (home.root / "cambium.db").exists()
    assert "1 live daily file" in ok(home, "import", str(tmp_path / "memory.tar"))
    assert (home.root / "cambium.db").stat().st_mode & 0o777 == 0o600
    assert ok(home, "signals") == "no signals\n"  # a database at the schema's head
    ok(home, "index", "rebuild")  # (or the daemon's start)
    answer = as_json(home, "memory", "recall", "lentil", "--horizon", "all")
    assert [hit["date"] for hit in answer["daily"]] == ["2026-11-30"]


def test_recall_and_substrate_answer_from_the_files_before_the_first_start(
    home: DaemonHome,
) -> None:
    """Issue 11, finding 15: both failed with "no database" though the files were there."""
    (home.root / "memory/long-term/food.md").write_text("# Food\nLentil soup on Fridays.\n")
    (home.root / "memory/daily/2026-11-30.md").write_text("lentil soup for lunch\n")
    answer = as_json(home, "memory", "recall", "lentil", "--horizon", "all")
    assert answer["marks"] == []
    assert [hit["date"] for hit in answer["daily"]] == ["2026-11-30"]
    assert [Path(hit["file"]).name for hit in answer["substrate"]] == ["food.md"]
    assert "lentil soup for lunch" in ok(home, "memory", "recall", "lentil", "--horizon", "all")
    listed = as_json(home, "memory", "substrate")
    assert [Path(f["path"]).name for f in listed["files"]] == ["food.md"]
    assert not (home.root / "cambium.db").exists(), "reading creates no database"


def test_times_are_shown_in_the_configured_zone_labelled_and_json_stays_utc(
    home: DaemonHome,
) -> None:
    ok(home, "db", "upgrade")
    seen = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)  # 11:00 in Berlin's summer time
    mark = make_mark("mk_zone", "user.food", workspace_id="default", half_life_days=0.0)
    store = Store(f"sqlite:///{home.root / 'cambium.db'}")
    store.start()
    try:
        insert(store, replace(mark, first_observed_at=seen, last_reinforced_at=seen))
    finally:
        store.close()
    shown = ok(home, "memory", "recall", "user.food", "--layers", "marks")
    assert "first 2026-05-01 11:00:00 CEST" in shown and "09:00:00" not in shown
    [found] = as_json(home, "memory", "recall", "user.food", "--layers", "marks")["marks"]
    assert found["first_observed_at"] == "2026-05-01T09:00:00Z"
