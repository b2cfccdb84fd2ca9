"""Setup in one command: ``cambium init`` then ``cambium run`` then a recall works with no
other step; ``cambium service install`` writes a unit systemd accepts and a plist that parses;
the reference files in deployments/ are the same templates rendered."""

from __future__ import annotations

import os
import plistlib
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from daemon.client import Client
from daemon.service_files import LAYER_DIRECTORIES, render_agent, render_unit

CAMBIUM = str(Path(sys.executable).with_name("cambium"))
REPO = Path(__file__).resolve().parents[1]


def cambium(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CAMBIUM_CONFIG", "NOTIFY_SOCKET")}
    env["HOME"] = str(home)
    return subprocess.run([CAMBIUM, *args], capture_output=True, text=True, env=env, timeout=60)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_init_then_run_then_recall_works_with_no_other_step(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    made = cambium("init", str(root), home=tmp_path)
    assert made.returncode == 0, made
    config = root / "cambium.toml"
    assert f"cambium run --config {config}" in made.stdout
    assert f"cambium service install --config {config}" in made.stdout
    assert mode(config) == 0o600 and "# " in config.read_text(), "private and commented"
    for name in LAYER_DIRECTORIES:
        assert mode(root / name) == 0o700, name
    again = cambium("init", str(root), home=tmp_path)
    assert again.returncode == 1 and "already exists" in again.stderr

    env = {k: v for k, v in os.environ.items() if k not in ("CAMBIUM_CONFIG", "NOTIFY_SOCKET")}
    log = (tmp_path / "daemon.log").open("w")
    daemon = subprocess.Popen(
        [CAMBIUM, "run", "--config", str(config)], stdout=log, stderr=subprocess.STDOUT, env=env
    )
    try:
        socket = root / "run" / "cambium.sock"
        with Client(socket, source_id="setup-test") as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    assert client.health().status == "ok"
                    break
                except Exception:
                    if time.monotonic() > deadline or daemon.poll() is not None:
                        raise
                    time.sleep(0.1)
            client.observe("user.food.lunch", "likes lentil soup", wait=10)
        recalled = subprocess.run(
            [CAMBIUM, "memory", "recall", "lentil", "--config", str(config), "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert recalled.returncode == 0, recalled
        assert '"observation": "likes lentil soup"' in recalled.stdout
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
        log.close()


def test_service_install_writes_a_unit_systemd_accepts_and_uninstall_removes_it(
    tmp_path: Path,
) -> None:
    assert cambium("init", str(tmp_path / "mem"), home=tmp_path).returncode == 0
    config = tmp_path / "mem" / "cambium.toml"
    done = cambium(
        "service", "install", "--platform", "systemd", "--config", str(config), home=tmp_path
    )
    assert done.returncode == 0, done
    unit = tmp_path / ".config" / "systemd" / "user" / "cambium.service"
    text = unit.read_text()
    assert f"ExecStart={CAMBIUM} run --config {config}\n" in text
    assert "systemctl --user enable --now cambium" in done.stdout
    if shutil.which("systemd-analyze"):
        checked = subprocess.run(
            ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
        )
        assert checked.returncode == 0, checked.stderr
    removed = cambium("service", "uninstall", "--platform", "systemd", home=tmp_path)
    assert removed.returncode == 0 and not unit.exists(), removed
    assert cambium("service", "uninstall", home=tmp_path).returncode == 1


def test_service_install_writes_a_launchd_plist_that_parses(tmp_path: Path) -> None:
    assert cambium("init", str(tmp_path / "my mem"), home=tmp_path).returncode == 0
    config = tmp_path / "my mem" / "cambium.toml"
    done = cambium(
        "service", "install", "--platform", "launchd", "--config", str(config), home=tmp_path
    )
    assert done.returncode == 0, done
    agent = tmp_path / "Library" / "LaunchAgents" / "com.cambium.memory.plist"
    parsed = plistlib.loads(agent.read_bytes())
    assert parsed["Label"] == "com.cambium.memory"
    assert parsed["ProgramArguments"] == [CAMBIUM, "run", "--config", str(config)]
    assert parsed["StandardOutPath"] == str(tmp_path / "Library" / "Logs" / "cambium.log")
    assert parsed["KeepAlive"] == {"SuccessfulExit": False}
    assert "launchctl bootstrap gui/" in done.stdout


def test_service_install_needs_a_config_file(tmp_path: Path) -> None:
    done = cambium("service", "install", home=tmp_path)
    assert done.returncode == 1 and "cambium init" in done.stderr


def test_the_reference_deployment_is_the_same_templates_rendered() -> None:
    deployment = REPO / "deployments" / "obadiah"
    unit = render_unit("%h/.local/bin/cambium", "%h/Projects/Obadiah/cambium.toml")
    assert (deployment / "cambium.service").read_text() == unit
    joshua = "/Users/joshua"
    agent = render_agent(
        f"{joshua}/.local/bin/cambium",
        f"{joshua}/Projects/Obadiah/cambium.toml",
        f"{joshua}/Library/Logs",
    )
    assert (deployment / "com.cambium.memory.plist").read_text() == agent
    assert plistlib.loads(agent.encode())["Label"] == "com.cambium.memory"
