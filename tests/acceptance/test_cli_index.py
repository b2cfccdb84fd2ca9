"""``cambium index check`` and ``cambium index rebuild`` on a store the daemon never ran on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.testing import DaemonHome

pytestmark = pytest.mark.subprocess  # starts `cambium` as a subprocess


def test_check_reports_what_is_missing_and_rebuild_builds_it_with_progress(
    tmp_path: Path,
) -> None:
    home = DaemonHome(tmp_path)
    daily = tmp_path / "memory" / "daily"
    for day in ("2026-04-10", "2026-04-11"):
        (daily / f"{day}.md").write_text(f"walked the dog on {day}\n")
    assert home.cli("db", "upgrade").returncode == 0

    check = home.cli("index", "check", "--json")
    assert check.returncode == 1
    report = json.loads(check.stdout)
    assert [(f["day"], f["file"], f["why"]) for f in report["daily"]] == [
        ("2026-04-10", "live", "not indexed"),
        ("2026-04-11", "live", "not indexed"),
    ]

    rebuild = home.cli("index", "rebuild")
    assert rebuild.returncode == 0, rebuild.stderr
    assert "daily files: 2/2" in rebuild.stderr
    assert "the index is up to date" in rebuild.stdout
    assert home.cli("index", "check").returncode == 0

    (daily / "2026-04-11.md").write_text("walked the cat instead\n")
    stale = home.cli("index", "check")
    assert stale.returncode == 1
    assert "daily 2026-04-11 (live): changed since it was indexed" in stale.stdout


def test_check_and_rebuild_cover_the_substrate_and_the_compost(tmp_path: Path) -> None:
    home = DaemonHome(tmp_path)
    notes = home.substrate / "pets.md"
    notes.write_text("# Pets\n\nThe dog sleeps after lunch.\n")
    learned = tmp_path / "memory" / "compost" / "retired.json"
    learned.write_text(json.dumps(compost_record(["Walk the dog before breakfast"])))
    assert home.cli("db", "upgrade").returncode == 0

    check = home.cli("index", "check", "--json")
    assert check.returncode == 1
    report = json.loads(check.stdout)
    assert report["substrate"] == [{"path": str(notes), "why": "not indexed"}]
    assert report["compost"] == [{"path": str(learned), "why": "not indexed"}]

    rebuild = home.cli("index", "rebuild")
    assert rebuild.returncode == 0, rebuild.stderr
    assert "substrate files: 1/1" in rebuild.stderr
    assert "compost files: 1/1" in rebuild.stderr
    assert home.cli("index", "check").returncode == 0
    # The daemon is down: recall answers from the index the rebuild wrote, read only.
    recalled = home.cli("memory", "recall", "dog", "--json", "--layers", "substrate,compost")
    assert recalled.returncode == 0, recalled.stderr
    answer = json.loads(recalled.stdout)
    assert [hit["file"] for hit in answer["substrate"]] == [str(notes)]
    assert [hit["learning"] for hit in answer["compost"]] == ["Walk the dog before breakfast"]

    notes.unlink()
    learned.write_text(json.dumps(compost_record(["Feed the cat at noon"])))
    stale = home.cli("index", "check")
    assert stale.returncode == 1
    assert f"substrate {notes}: indexed, but gone" in stale.stdout
    assert f"compost {learned}: changed since it was indexed" in stale.stdout


def compost_record(strategies: list[str]) -> dict[str, object]:
    return {
        "id": "cmp-1",
        "agent_id": "a-1",
        "template_id": "tpl-walks",
        "success_rate": 0.9,
        "failure_patterns": [],
        "successful_strategies": strategies,
        "template_improvements": [],
        "routing_hints": [],
        "composted_at": "2026-04-01T00:00:00Z",
        "reason": "end of lifetime",
    }
