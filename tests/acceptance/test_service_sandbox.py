"""Issue 26, finding 9: the hardened unit still runs the daemon. Without systemd as PID 1
(containers, CI) the unit's ExecStart command line is run under the restrictions that can be
applied without it (tests/service_sandbox.py: a read-only file system but for the unit's
ReadWritePaths, its UMask, NoNewPrivileges and MemoryDenyWriteExecute), SQLite and with the
semantic model on; it starts, takes a note, recalls it, and writes nowhere else."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_setup import cambium, unit_settings

from daemon.client import Client

pytestmark = pytest.mark.subprocess

SANDBOX = Path(__file__).parent.parent / "service_sandbox.py"


def sandboxed(unit: Path, *command: str) -> list[str]:
    prefix = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        prefix.insert(1, "--map-root-user")
    return [*prefix, sys.executable, str(SANDBOX), str(unit), "--", *command]


def sandbox_or_skip(tmp_path: Path) -> None:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("util-linux's unshare and mount are needed to apply the unit's restrictions")
    probe = tmp_path / "probe.service"
    probe.write_text("UMask=0077\n")
    tried = subprocess.run(sandboxed(probe, "true"), capture_output=True, text=True, timeout=60)
    if tried.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here: {tried.stderr.strip()}")


def wait_healthy(client: Client, daemon: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            assert client.health().status == "ok"
            return
        except Exception:
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise AssertionError(log.read_text()) from None
            time.sleep(0.1)


@pytest.mark.parametrize("semantic", [False, True], ids=["lexical", "semantic"])
def test_the_units_command_line_runs_under_its_restrictions(tmp_path: Path, semantic: bool) -> None:
    if semantic and importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("the semantic extra is not installed")
    sandbox_or_skip(tmp_path)
    root = tmp_path / "mem"
    assert cambium("init", str(root), home=tmp_path).returncode == 0
    config = root / "cambium.toml"
    if semantic:  # the cache in the store's directory, which the unit may write
        config.write_text(
            config.read_text() + '\n[recall]\nsemantic = true\nembeddings = "store/emb.sqlite"\n'
        )
    installed = cambium("service", "install", "--platform", "systemd", "--config", str(config),
                        home=tmp_path)  # fmt: skip
    assert installed.returncode == 0, installed
    unit = tmp_path / ".config" / "systemd" / "user" / "cambium.service"
    (exec_start,) = unit_settings(unit)["ExecStart"]
    assert unit_settings(unit)["MemoryDenyWriteExecute"] == ["yes"]

    outside = subprocess.run(sandboxed(unit, "touch", str(root / "outside")), timeout=60)
    assert outside.returncode != 0 and not (root / "outside").exists(), "the sandbox holds"

    env = {k: v for k, v in os.environ.items() if k not in ("CAMBIUM_CONFIG", "NOTIFY_SOCKET")}
    env["HOME"] = str(tmp_path)
    log = tmp_path / "daemon.log"
    with log.open("wb") as output:
        daemon = subprocess.Popen(
            sandboxed(unit, *exec_start.split()), stdout=output, stderr=subprocess.STDOUT, env=env
        )
    try:
        with Client(root / "run" / "cambium.sock", source_id="sandbox-test") as client:
            wait_healthy(client, daemon, log)
            client.observe("user.food.lunch", "likes lentil soup", wait=30)
            found = client.recall("lentil soup")
            assert [m.observation for m in found.marks] == ["likes lentil soup"]
    finally:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(60)
    assert code == 0, log.read_text()
    assert (root / "store" / "cambium.db").exists()
    if semantic:
        assert (root / "store" / "emb.sqlite").exists(), log.read_text()
    written = {p.relative_to(root).parts[0] for p in root.rglob("*") if p.is_file()}
    assert written <= {"cambium.toml", "store", "run", "memory"}, written
