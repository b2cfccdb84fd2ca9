"""Where ``cambium memory recall`` reads from: the running daemon when it is up (it keeps
its index current and holds the model), the store's index as it is when it is down, and
then read-only: the CLI never builds an index, not even in memory, and never writes the
database. And what the light commands import: the ones the daemon answers (``status``, a
recall, ``mcp``'s handshake) load neither the store nor pydantic nor httpx."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from daemon.testing import CAMBIUM, DaemonHome, running

pytestmark = pytest.mark.subprocess  # starts `cambium` as a subprocess

# What a read the daemon answers must not import: each costs tens to hundreds of
# milliseconds, and the store and the model are the daemon's to hold.
HEAVY = (
    "sqlalchemy", "alembic", "fastapi", "daemon.store", "daemon.bus", "daemon.services",
    "daemon.search", "onnxruntime", "pydantic", "httpx", "mcp", "mcp_types",
)  # fmt: skip
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "lazy", "version": "1"},
    },
}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHome]:
    home = DaemonHome(tmp_path_factory.mktemp("reads"))
    with running(home):
        yield home


def imports(home: DaemonHome, *args: str, stdin: str = "") -> tuple[set[str], str]:
    """The modules ``cambium ARGS`` imported (Python's own ``-X importtime`` log), and what
    it printed."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", CAMBIUM, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=home.env(),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    log = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    return {line.rsplit("|", 1)[1].strip() for line in log[1:]}, result.stdout


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_reads_the_daemon_answers_import_neither_the_store_nor_pydantic(
    daemon: DaemonHome,
) -> None:
    status, shown = imports(daemon, "status", "--json")
    assert json.loads(shown)["status"] == "ok"
    # Read from the config file with the socket: the zone a person reads times in.
    text = daemon.cli("status")
    assert re.search(r"next \d{4}-\d\d-\d\d \d\d:\d\d:\d\d CES?T", text.stdout), text.stdout
    recall, shown = imports(daemon, "memory", "recall", "lentil")
    assert "marks (0)" in shown
    as_json, shown = imports(daemon, "memory", "recall", "lentil", "--json")
    assert json.loads(shown)["marks"] == []
    assert (heavy(status), heavy(recall), heavy(as_json)) == ([], [], [])
    assert "daemon.client._wire" in status and "rich" in recall  # what they do use


def test_mcp_answers_initialize_before_loading_pydantic_or_the_client(
    daemon: DaemonHome,
) -> None:
    modules, shown = imports(daemon, "mcp", stdin=json.dumps(INITIALIZE) + "\n")
    answer = json.loads(shown.splitlines()[0])
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "cambium-memory"
    assert heavy(modules) == []


def database_files(home: DaemonHome) -> dict[str, tuple[bytes, int]]:
    return {
        path.name: (path.read_bytes(), path.stat().st_mtime_ns)
        for path in home.root.glob("cambium.db*")
    }


def found(home: DaemonHome, word: str) -> list[str]:
    result = home.cli("memory", "recall", word, "--layers", "daily", "--horizon", "all", "--json")
    assert result.returncode == 0, result.stderr
    return [hit["excerpt"] for hit in json.loads(result.stdout)["daily"]]


def test_recall_asks_the_daemon_and_with_it_down_reads_the_store_as_it_is(
    tmp_path: Path,
) -> None:
    home = DaemonHome(tmp_path)
    log = home.root / "memory" / "daily" / f"{date.today().isoformat()}.md"
    with running(home):
        log.write_text("planted tomatoes by the wall\n")  # by hand: no signal, no index
        # The daemon brings its index in line with the file before it answers.
        assert found(home, "tomatoes") == ["planted tomatoes by the wall"]
        assert home.stop(signal.SIGTERM) == 0
    before = database_files(home)
    assert "cambium.db" in before

    with log.open("a") as file:
        file.write("sowed basil in pots\n")
    # Read as the index has it: the line written since is not searched, and it says so.
    assert found(home, "tomatoes") == ["planted tomatoes by the wall"]
    offline = home.cli("memory", "recall", "basil", "--horizon", "all")
    assert offline.returncode == 0, offline.stderr
    assert "daily (0)" in offline.stdout
    assert "the text index is not current" in offline.stderr
    assert database_files(home) == before  # not a byte, not an mtime: nothing written
