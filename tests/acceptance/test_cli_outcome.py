"""A CLI write whose answer never comes may have been stored: it exits 4 ("sent, outcome
unknown") and prints the idempotency key it used, and re-running with that key stores it
at most once. (Before, such a write exited 3, "not reachable", inviting a blind re-run that
stored it twice.)"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from lossy_proxy import losing_answers

from daemon.testing import DaemonHome, running

KEY = re.compile(r"--idempotency-key (\S+)")


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonHome]:
    home = DaemonHome(tmp_path)
    with running(home):
        yield home


def through(home: DaemonHome, proxy: Path) -> Path:
    """A copy of the home's config whose socket is ``proxy``."""
    config = home.root / "lossy.toml"
    config.write_text(home.config.read_text().replace('"run/cambium.sock"', f'"{proxy}"'))
    return config


def test_a_note_whose_answer_is_lost_exits_4_and_its_rerun_is_stored_once(
    daemon: DaemonHome,
) -> None:
    proxy = daemon.run_dir / "lossy.sock"
    with losing_answers(daemon.socket, proxy):
        sent = daemon.cli(
            "memory",
            "note",
            "ran 5 km",
            "--date",
            "2026-01-15",
            "--config",
            str(through(daemon, proxy)),
        )
    assert sent.returncode == 4, sent
    assert sent.stderr.startswith("cambium: sent, outcome unknown")
    key = KEY.search(sent.stderr)
    assert key, sent.stderr
    rerun = daemon.cli(
        "memory", "note", "ran 5 km", "--date", "2026-01-15", "--idempotency-key", key[1]
    )
    assert rerun.returncode == 0, rerun
    day = daemon.root / "memory" / "daily" / "2026-01-15.md"
    assert day.read_text().count("ran 5 km") == 1, "stored once, though sent twice"


def test_an_emit_whose_answer_is_lost_prints_the_key_it_was_given(daemon: DaemonHome) -> None:
    proxy = daemon.run_dir / "lossy.sock"
    payload = '{"text": "stretching"}'
    args = ["emit", "memory.daily_note", "--source-id", "script", "--payload", payload]
    with losing_answers(daemon.socket, proxy):
        sent = daemon.cli(
            *args, "--idempotency-key", "stretch-1", "--config", str(through(daemon, proxy))
        )
    assert sent.returncode == 4, sent
    assert "--idempotency-key stretch-1" in sent.stderr
    rerun = daemon.cli(*args, "--idempotency-key", "stretch-1", "--json")
    assert rerun.returncode == 0, rerun
    assert '"duplicate": true' in rerun.stdout


def test_every_write_command_takes_an_idempotency_key(daemon: DaemonHome) -> None:
    for command in (
        ["emit", "--help"],
        ["memory", "mark", "--help"],
        ["memory", "note", "--help"],
        ["memory", "consolidate", "--help"],
        ["memory", "seeds", "accept", "--help"],
        ["memory", "seeds", "reject", "--help"],
    ):
        shown = daemon.cli(*command)
        assert "--idempotency-key" in shown.stdout, command
