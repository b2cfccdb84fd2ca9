"""The ``cambium`` command line, run as the installed command against the real daemon.

Each test that needs a daemon starts one and runs many commands against it: a start costs
a second or two. Exit codes: 0 ok, 1 failed, 2 bad input, 3 daemon not reachable.
"""

from __future__ import annotations

import json
import re
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
import pytest

from daemon.cli.main import cli
from daemon.testing import DaemonHome, running

pytestmark = pytest.mark.subprocess  # starts `cambium` as a subprocess

RECALL_KEYS = {"substrate", "marks", "daily", "compost", "summary"}
MARK_KEYS = {
    "id",
    "subject",
    "observation",
    "current_strength",
    "state",
    "observed_by",
    "first_observed_at",
    "last_reinforced_at",
    "reinforcement_count",
    "provenance",
    "evidence",
}
SEED_KEYS = {
    "id",
    "workspace_id",
    "subject",
    "proposed_change",
    "target_file",
    "based_on_marks",
    "planted_at",
    "planted_by",
    "state",
    "reviewed_at",
    "reviewed_by",
    "withered_at",
    "created_at",
    "updated_at",
}
SIGNAL_ROW_KEYS = {
    "id",
    "seq",
    "type",
    "source_id",
    "workspace_id",
    "emitted_at",
    "stored_at",
    "deliveries",
}
LUNCH = json.dumps(
    {
        "subject": "user.food.lunch",
        "observation": "likes lentil soup",
        "evidence": {"note": "said so in chat"},
    }
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DaemonHome:
    # getpass.getuser() reads LOGNAME first: the default observer and reviewer.
    monkeypatch.setenv("LOGNAME", "ada")
    monkeypatch.setenv("COLUMNS", "120")
    return DaemonHome(tmp_path)


def ok(home: DaemonHome, *args: str) -> str:
    result = home.cli(*args)
    assert result.returncode == 0, f"cambium {' '.join(args)}:\n{result.stderr}{result.stdout}"
    return result.stdout


def fails(home: DaemonHome, code: int, *args: str) -> str:
    """Run a command that must exit ``code``; its message (stderr)."""
    result = home.cli(*args)
    assert result.returncode == code, f"cambium {' '.join(args)}: {result.returncode}\n{result}"
    return result.stderr


def as_json(home: DaemonHome, *args: str) -> Any:
    return json.loads(ok(home, *args, "--json"))


def commands(group: click.Group, path: str = "") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    context = click.Context(group)
    for name in group.list_commands(context):  # the lazy group loads each one as it is asked
        command = group.get_command(context, name)
        assert command is not None, name
        found.append((f"{path} {name}".strip(), command))
        if isinstance(command, click.Group):
            found += commands(command, f"{path} {name}")
    return found


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
    }  # fmt: skip
    # init makes a config (in DIR), and uninstall removes a file whatever config made it.
    no_config = {"init", "service uninstall"}
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


def test_json_outputs_and_how_strength_is_explained(home: DaemonHome) -> None:
    (home.root / "memory/long-term/food.md").write_text("I drink my coffee black.\n")
    with running(home):
        health = as_json(home, "status")
        assert {"status", "version", "uptime_seconds", "receptors", "deliveries", "rhythms"} <= set(
            health
        )
        assert health["substrate"]["watched_files"] == [str(home.root / "memory/long-term/food.md")]
        readable = ok(home, "status")
        assert "0 pending, 0 dead" in readable and "consolidation  next " in readable

        first = as_json(
            home, "emit", "memory.observation", "--payload", LUNCH, "--source-id", "chat"
        )
        assert first["duplicate"] is False and first["deliveries"] == {"observation": "delivered"}
        again = ok(home, "emit", "memory.observation", "--payload", LUNCH, "--source-id", "chat")
        assert again.splitlines()[1].split() == ["observation", "delivered"]
        typo = ("emit", "memory.observaton", "--payload", LUNCH, "--source-id", "chat")
        assert "type: no receptor binds memory.observaton" in fails(home, 2, *typo)
        no_evidence = '{"subject": "user.x", "observation": "o"}'
        refused = fails(
            home, 2, "emit", "memory.observation", "--payload", no_evidence, "--source-id", "s"
        )
        assert "payload.evidence: Field required" in refused
        keyed = ("emit", "x.y", "--payload", "{}", "--source-id", "s", "--idempotency-key", "k1")
        keyed += ("--allow-unrouted",)
        assert "unrouted: no receptor binds x.y" in ok(home, *keyed)
        assert ok(home, *keyed).startswith("already stored as signal")

        # A mark observed 60 days ago with a 7-day half-life has faded; a consolidation's
        # wither sweep marks it withered.
        old = {
            "type": "memory.observation",
            "source_id": "chat",
            "decay_rate": 7 * 86400,
            "emitted_at": (datetime.now(UTC) - timedelta(days=60)).isoformat(),
            "payload": {
                "subject": "user.food.old",
                "observation": "ate meat",
                "evidence": {"note": "n"},
            },
        }
        assert home.post("/v1/signals?wait=5", old).status_code == 201
        ok(home, "memory", "consolidate", "--date", "2026-01-01")

        recalled = as_json(home, "memory", "recall", "user.food")
        assert set(recalled) == RECALL_KEYS and recalled["summary"] is None
        assert [m["subject"] for m in recalled["marks"]] == ["user.food.lunch"]
        lunch = recalled["marks"][0]
        assert set(lunch) == MARK_KEYS and lunch["reinforcement_count"] == 1
        assert lunch["current_strength"] == pytest.approx(0.9, abs=0.01)
        assert recalled["daily"] == [] and recalled["compost"] == []
        hit = as_json(home, "memory", "recall", "coffee")["substrate"][0]
        assert set(hit) == {"file", "excerpt", "reason"}
        withered = as_json(home, "memory", "recall", "user.food.old", "--include-withered")
        assert [m["state"] for m in withered["marks"]] == ["withered"]

        text = ok(home, "memory", "recall", "user.food", "--include-withered", "--layers", "marks")
        assert "user.food.lunch — likes lentil soup" in text
        assert "0.90  now" in text
        assert "0.70  from 0.70 initial, 0.00 days old, half-life 14 days" in text
        assert "0.20  from +0.20 reinforced " in text
        assert "user.food.old — ate meat" in text and "withered" in text
        assert "60.00 days old, half-life 7 days" in text

        marked = ok(
            home, "memory", "mark", "User.Coffee", "takes coffee black", "--decay-days", "0"
        )
        assert marked.startswith("user.coffee — takes coffee black\n")
        assert re.search(r"mark +mk_\w+, stated by ada\n", marked), marked
        assert "note: stated by ada via cambium memory mark" in marked
        assert "0.70  from 0.70 initial, 0.00 days old, no decay" in marked

        rows = as_json(home, "signals")
        assert all(set(row) == SIGNAL_ROW_KEYS for row in rows)
        ours = [r for r in rows if not r["source_id"].startswith("rhythm:")]  # not 03:00's
        assert [r["type"] for r in ours][:2] == ["memory.observation", "memory.consolidate"]
        assert [r["id"] for r in as_json(home, "signals", "--status", "unrouted")] == [
            r["id"] for r in rows if r["type"] == "x.y"
        ]
        assert len(as_json(home, "signals", "--type", "memory.observation", "--limit", "2")) == 2
        shown = as_json(home, "signals", "show", first["id"])
        assert shown["payload"] == json.loads(LUNCH) and shown["deliveries"][0]["attempts"] == 1
        assert '"observation": "likes lentil soup"' in ok(home, "signals", "show", first["id"])
        assert fails(home, 1, "signals", "show", "nope") == "cambium: no signal nope\n"

        substrate = as_json(home, "memory", "substrate")
        assert substrate["entries"][0] == {
            "path": str(home.root / "memory/long-term"),
            "kind": "directory",
            "files": [str(home.root / "memory/long-term/food.md")],
        }
        assert substrate["entries"][1]["kind"] == "missing"
        assert substrate["files"] == [
            {
                "path": str(home.root / "memory/long-term/food.md"),
                "content": "I drink my coffee black.\n",
            }
        ]
        assert f"==> {home.root}/memory/long-term/food.md <==" in ok(home, "memory", "substrate")


def test_a_seed_from_planting_to_promotion_and_reading_with_the_daemon_down(
    home: DaemonHome,
) -> None:
    with running(home):
        ok(home, "memory", "mark", "user.coffee", "takes coffee black")
        mark_id = as_json(home, "memory", "recall", "user.coffee")["marks"][0]["id"]
        seed_payload = {
            "subject": "user.coffee",
            "proposed_change": "Add: takes coffee black",
            "target_file": "USER.md",
            "based_on_marks": [mark_id],
        }
        ok(home, "emit", "memory.seed_planted", "--source-id", "gardener",
           "--payload", json.dumps(seed_payload))  # fmt: skip
        [seed] = as_json(home, "memory", "seeds", "--state", "pending")
        assert set(seed) == SEED_KEYS and seed["planted_by"] == "gardener"
        assert seed["planted_at"].endswith("Z")
        assert f"{seed['id']}  pending" in ok(home, "memory", "seeds")

        accepted = ok(home, "memory", "seeds", "accept", seed["id"])
        assert accepted.splitlines() == [
            f"seed {seed['id']} accepted by ada",
            f"promoted {mark_id}",
            "the daemon never edits USER.md: make the change yourself",
        ]
        [listed] = as_json(home, "memory", "seeds", "--state", "accepted")
        assert listed["id"] == seed["id"] and listed["reviewed_by"] == "ada"
        assert as_json(home, "memory", "seeds", "--state", "pending") == []
        assert [m["state"] for m in as_json(home, "memory", "recall", "user.coffee")["marks"]] == [
            "promoted"
        ]
        message = fails(home, 1, "memory", "seeds", "accept", seed["id"])
        assert message == f"cambium: seed {seed['id']} is already accepted\n"
        message = fails(home, 1, "memory", "seeds", "reject", "sd_nope", "--reviewer", "bob")
        assert message == "cambium: no seed sd_nope\n"
        assert home.stop(signal.SIGTERM) == 0

    unreachable = f"cambium: daemon not reachable at {home.socket} — start it with `cambium run`\n"
    for args in (
        ["status"],
        ["emit", "a.b", "--payload", "{}", "--source-id", "x"],
        ["memory", "mark", "user.tea", "green"],
        ["memory", "note", "hello"],
        ["memory", "consolidate"],
        ["memory", "seeds", "reject", seed["id"]],
        ["signals", "retry", "some-id"],
    ):
        assert fails(home, 3, *args) == unreachable, args
    # Reading needs no daemon.
    assert as_json(home, "memory", "recall", "user.coffee")["marks"][0]["state"] == "promoted"
    assert as_json(home, "memory", "seeds")[0]["state"] == "accepted"
    # Signals the bundled nightly rhythm emits (a run near 03:00 Berlin) are not ours.
    ours = [r for r in as_json(home, "signals") if not r["source_id"].startswith("rhythm:")]
    assert {r["type"] for r in ours} == {
        "memory.observation", "memory.seed_planted", "memory.seed_reviewed",
    }  # fmt: skip
    assert "user.coffee — takes coffee black" in ok(home, "memory", "recall", "user.coffee")
    assert as_json(home, "memory", "substrate")["files"] == []


def test_a_dead_delivery_is_delivered_by_a_retry(home: DaemonHome) -> None:
    # One attempt, so a failure is dead at once. The fault, which works even for root
    # (who ignores permissions): a regular file where the daily directory should be.
    home.extra_config = "max_attempts = 1\n"
    home.write_config()
    daily = home.root / "memory/daily"
    daily.rmdir()
    daily.write_text("")
    with running(home):
        fails(home, 1, "memory", "note", "a line to give up on", "--date", "2026-01-19")
        [doomed] = as_json(home, "signals", "--status", "dead")
        discarded = ok(home, "signals", "discard", doomed["id"])
        assert discarded.startswith(f"discarded the dead deliveries of signal {doomed['id']}:")
        assert "discarded by ada" in ok(home, "signals", "show", doomed["id"])
        assert [r["id"] for r in as_json(home, "signals", "--status", "discarded")] == [
            doomed["id"]
        ]
        message = fails(home, 1, "signals", "discard", doomed["id"])
        assert message == f"cambium: no dead delivery to discard (signal id {doomed['id']})\n"
        assert "give a signal ID, or --receptor NAME --all" in fails(home, 2, "signals", "discard")
        assert as_json(home, "status")["deliveries"]["dead"] == 0

        message = fails(home, 1, "memory", "note", "walked by the river", "--date", "2026-01-20")
        [dead] = as_json(home, "signals", "--status", "dead")
        assert message.startswith("cambium: delivery to daily is dead: ")
        assert message.endswith(f"fix the cause, then run `cambium signals retry {dead['id']}`\n")
        assert dead["type"] == "memory.daily_note"
        assert dead["deliveries"][0]["status"] == "dead"
        assert "daily dead after 1 attempt" in ok(home, "signals", "--status", "dead")
        assert as_json(home, "status")["deliveries"]["dead"] == 1

        daily.unlink()
        daily.mkdir()
        retried = ok(home, "signals", "retry", dead["id"])
        assert retried.splitlines() == [f"retried signal {dead['id']}", "  daily  delivered"]
        assert (daily / "2026-01-20.md").read_text() == "walked by the river\n"
        assert as_json(home, "signals", "--status", "dead") == []
        message = fails(home, 1, "signals", "retry", dead["id"])
        assert message == f"cambium: signal {dead['id']} has no dead delivery to retry\n"
        assert fails(home, 1, "signals", "retry", "nope") == "cambium: no signal nope\n"
