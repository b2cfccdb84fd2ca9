"""The store as a hostile user leaves it: a second daemon on the same database, the
database deleted or replaced under a running daemon, a corrupt file, a bad socket directory.
The real daemon each time, as a subprocess."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from observations import observation

from daemon.testing import CAMBIUM, DaemonHome, running

pytestmark = pytest.mark.subprocess  # starts `cambium` as a subprocess


def start_failing(home: DaemonHome) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CAMBIUM, "run", "--config", str(home.config)],
        capture_output=True,
        text=True,
        env=home.env(),
        timeout=60,
    )


def test_a_second_daemon_on_the_same_database_is_refused(tmp_path: Path) -> None:
    first = DaemonHome(tmp_path / "first")
    second = DaemonHome(tmp_path / "second", db_url=f"sqlite:///{first.root / 'cambium.db'}")
    with running(first):
        assert first.process is not None
        refused = start_failing(second)
        assert refused.returncode == 1
        assert f"another daemon (pid {first.process.pid})" in refused.stderr
        assert not second.socket.exists()
        # The first one is untouched and still the only one delivering.
        answer = first.post("/v1/signals", observation("guard", 1), params={"wait": 5})
        assert answer.json()["deliveries"] == {"observation": "delivered"}


def test_a_deleted_database_refuses_writes_and_health_says_so(tmp_path: Path) -> None:
    home = DaemonHome(tmp_path)
    with running(home):
        assert home.post("/v1/signals", observation("guard", 1)).status_code == 201
        database = tmp_path / "cambium.db"
        database.unlink()
        refused = home.post("/v1/signals", observation("guard", 2))
        assert refused.status_code == 503 and "deleted" in refused.json()["detail"]
        assert home.get("/v1/health").json()["status"] == "store lost"
        database.write_bytes(b"")  # replaced by another file: still refused
        assert home.post("/v1/signals", observation("guard", 3)).status_code == 503
        assert home.stop(signal.SIGTERM) == 0


def test_a_file_that_is_not_a_database_is_named_as_such(tmp_path: Path) -> None:
    home = DaemonHome(tmp_path)
    (tmp_path / "cambium.db").write_bytes(b"this is not SQLite, just some text\n" * 200)
    refused = start_failing(home)
    assert refused.returncode == 1
    assert "is not a usable SQLite database" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_corrupt_database_is_named_as_such(tmp_path: Path) -> None:
    home = DaemonHome(tmp_path)
    with running(home), home.client() as client:
        for n in range(300):
            client.post("/v1/signals", json=observation("guard", n), timeout=30)
        assert home.stop(signal.SIGTERM) == 0  # the last connection checkpoints the WAL
    database = tmp_path / "cambium.db"
    data = bytearray(database.read_bytes())
    page = 4096
    assert len(data) > 20 * page
    middle = len(data) // page // 2 * page
    data[middle : middle + page] = b"\xa5" * page  # scribble over a whole b-tree page
    database.write_bytes(bytes(data))
    refused = start_failing(home)
    assert refused.returncode == 1
    assert "corrupt" in refused.stderr or "not a usable" in refused.stderr, refused.stderr


def test_a_socket_directory_open_to_others_is_bad_config(tmp_path: Path) -> None:
    home = DaemonHome(tmp_path)
    home.run_dir.chmod(0o755)
    refused = start_failing(home)
    assert refused.returncode == 2
    assert "bad config: ingress.socket:" in refused.stderr and "0755" in refused.stderr
