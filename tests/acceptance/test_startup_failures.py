"""A store that cannot be reached is told in one line: which store (password masked), its
host and port, and the cause; exit 1, or 2 when the URL itself is unusable; no traceback.
For ``cambium run``, ``cambium db upgrade`` and the commands that read the store."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from daemon.testing import CAMBIUM

UNREACHABLE = "postgresql+psycopg://postgres:hunter2@127.0.0.1:1/test"  # nothing listens on 1


def cambium(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700, exist_ok=True)
    config = tmp_path / "cambium.toml"
    config.write_text(f'[store]\nurl = "{url}"\n[ingress]\nsocket = "{run_dir / "s.sock"}"\n')
    return subprocess.run(
        [CAMBIUM, *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "command",
    [
        ("run",),
        ("db", "upgrade"),
        ("signals",),
        ("memory", "recall", "figs"),
        ("memory", "seeds"),
        ("export", "out.json"),
    ],
)
def test_an_unreachable_postgresql_is_one_line_naming_store_host_and_cause(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    result = cambium(tmp_path, UNREACHABLE, *command)
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("cambium: ")
    assert "postgresql+psycopg://postgres:***@127.0.0.1:1/test" in line, "the store, masked"
    assert "hunter2" not in line
    assert "host 127.0.0.1, port 1" in line
    assert "Connection refused" in line
    assert "Background on this error" not in line


@pytest.mark.parametrize("command", [("run",), ("db", "upgrade"), ("signals",)])
def test_a_store_url_no_driver_takes_is_a_config_error(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    result = cambium(tmp_path, "postgresql+nodriver://127.0.0.1/test", *command)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("cambium: bad config: store.url:")
    assert "postgresql.nodriver" in line


def test_cambium_run_refuses_an_overlapping_daily_directory_with_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "cambium.toml"
    config.write_text(
        f"""
[store]
url = "sqlite:///{tmp_path / "cambium.db"}"
[ingress]
socket = "{tmp_path / "run" / "cambium.sock"}"
[paths]
substrate = ["memory"]
daily = "memory/daily"
"""
    )
    result = subprocess.run(
        [CAMBIUM, "run", "--config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stderr
    assert "paths.daily" in result.stderr and "paths.substrate[0]" in result.stderr
    assert not (tmp_path / "cambium.db").exists(), "refused before anything is touched"
