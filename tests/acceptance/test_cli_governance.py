"""``cambium memory correct|retract|forget|tombstones``, ``seeds undo``, ``export`` and
``import``, run as the installed command against the real daemon."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from daemon.testing import DaemonHome, running

pytestmark = pytest.mark.subprocess  # starts `cambium` as a subprocess

HEALTH = "gets migraines on Tuesdays"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DaemonHome:
    monkeypatch.setenv("LOGNAME", "ada")
    monkeypatch.setenv("COLUMNS", "160")
    return DaemonHome(tmp_path / "home")


def ok(home: DaemonHome, *args: str) -> str:
    result = home.cli(*args)
    assert result.returncode == 0, f"cambium {' '.join(args)}:\n{result.stderr}{result.stdout}"
    return result.stdout


def as_json(home: DaemonHome, *args: str) -> Any:
    return json.loads(ok(home, *args, "--json"))


def test_correct_twice_forget_and_carry_the_memory_out(home: DaemonHome, tmp_path: Path) -> None:
    with running(home):
        ok(home, "memory", "mark", "user.sleep.bedtime", "in bed by 23:00")
        [first] = as_json(home, "memory", "recall", "user.sleep", "--layers", "marks")["marks"]
        said = ok(home, "memory", "correct", first["id"], "in bed by 22:30", "--reason", "earlier")
        assert f"{first['id']} is superseded by" in said
        [second] = as_json(home, "memory", "recall", "user.sleep", "--layers", "marks")["marks"]
        ok(home, "memory", "correct", second["id"], "in bed by 22:00", "--reason", "earlier still")
        [third] = as_json(home, "memory", "recall", "user.sleep", "--layers", "marks")["marks"]
        assert third["observation"] == "in bed by 22:00"
        chain = as_json(
            home, "memory", "recall", "user.sleep", "--layers", "marks", "--include-history"
        )["marks"]
        links = {m["id"]: (m["supersedes"], m["superseded_by"]) for m in chain}
        assert links == {
            first["id"]: (None, second["id"]),
            second["id"]: (first["id"], third["id"]),
            third["id"]: (second["id"], None),
        }
        text = ok(home, "memory", "recall", "user.sleep", "--layers", "marks", "--include-history")
        assert f"corrected by  {second['id']}" in text and "earlier still" in text

        stale = home.cli("memory", "correct", first["id"], "x", "--reason", "y")
        assert stale.returncode == 1 and "already superseded" in stale.stderr
        missing = home.cli("memory", "retract", "mk_nope", "--reason", "y")
        assert missing.returncode == 1 and "no mark mk_nope" in missing.stderr
        no_reason = home.cli("memory", "forget", "user.health")
        assert no_reason.returncode == 2 and "--reason" in no_reason.stderr

        ok(home, "memory", "mark", "user.health.migraine", HEALTH)
        signals_before = len(as_json(home, "signals"))
        forgot = ok(home, "memory", "forget", "user.health", "--reason", "private")
        assert "forgot user.health: 1 mark and 1 signal payload erased" in forgot
        assert as_json(home, "memory", "recall", "user.health", "--layers", "marks")["marks"] == []
        [tombstone] = as_json(home, "memory", "tombstones")
        assert (tombstone["forgotten_by"], tombstone["reason"], tombstone["marks_erased"]) == (
            "ada",
            "private",
            1,
        )
        assert "user.health  by ada: private (1 mark, 1 signal)" in ok(home, "memory", "tombstones")
        assert len(as_json(home, "signals")) == signals_before + 1  # the forget itself
        archive = tmp_path / "memory.tar"
        exported = as_json(home, "export", str(archive))
    assert HEALTH.encode() not in (home.root / "cambium.db").read_bytes()
    assert HEALTH.encode() not in archive.read_bytes()
    assert home.cli("export", str(archive)).returncode == 2  # never replaced silently

    elsewhere = DaemonHome(tmp_path / "elsewhere")
    ok(elsewhere, "db", "upgrade")
    first_import = as_json(elsewhere, "import", str(archive))
    assert first_import["signals"] == signals_before + 1
    assert ok(elsewhere, "import", str(archive)).startswith("imported 0 signals, 0 marks, ")
    again = as_json(elsewhere, "export", str(tmp_path / "again.tar"))
    assert again["content_hash"] == exported["content_hash"]
    damaged = bytearray(archive.read_bytes())
    with tarfile.open(archive) as members:
        damaged[members.getmember("signals.jsonl").offset_data + 5] ^= 0xFF
    (tmp_path / "damaged.tar").write_bytes(bytes(damaged))
    refused = elsewhere.cli("import", str(tmp_path / "damaged.tar"))
    assert refused.returncode == 1 and "signals.jsonl: SHA-256 does not match" in refused.stderr
    assert "nothing was imported" in refused.stderr
