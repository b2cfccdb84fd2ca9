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
