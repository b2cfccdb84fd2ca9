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

import pytest

from daemon.client import Client
from daemon.service_files import LAYER_DIRECTORIES

CAMBIUM = str(Path(sys.executable).with_name("cambium"))
REPO = Path(__file__).resolve().parents[2]


def cambium(*args: str, home: Path, **environment: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CAMBIUM_CONFIG", "NOTIFY_SOCKET")}
    env["HOME"] = str(home)
    env.update(environment)
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


def unit_settings(unit: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in unit.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            found.setdefault(key, []).append(value)
    return found


def installed_unit(tmp_path: Path, config_text: str = "") -> Path:
    assert cambium("init", str(tmp_path / "mem"), home=tmp_path).returncode == 0
    config = tmp_path / "mem" / "cambium.toml"
    if config_text:
        config.write_text(config.read_text() + config_text)
    done = cambium(
        "service", "install", "--platform", "systemd", "--config", str(config), home=tmp_path
    )
    assert done.returncode == 0, done
    assert "systemctl --user enable --now cambium" in done.stdout
    return tmp_path / ".config" / "systemd" / "user" / "cambium.service"


def exposure(unit: Path) -> float:
    """``systemd-analyze security``'s overall exposure for ``unit`` (0 best, 10 worst)."""
    rated = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    last = rated.stdout.strip().splitlines()[-1]
    assert "Overall exposure level" in last, rated
    return float(last.split(": ")[1].split()[0])


def test_service_install_writes_a_unit_systemd_accepts(tmp_path: Path) -> None:
    unit = installed_unit(tmp_path)
    root = tmp_path / "mem"
    text = unit.read_text()
    assert f"ExecStart={CAMBIUM} run --config {root / 'cambium.toml'}\n" in text
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    checked = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stderr


def test_the_unit_writes_only_the_store_daily_and_socket_directories(tmp_path: Path) -> None:
    """Issue 26, finding 9: the unit was rated 9.2 UNSAFE by systemd-analyze security."""
    unit = installed_unit(tmp_path)
    root = tmp_path / "mem"
    settings = unit_settings(unit)
    assert settings["ReadWritePaths"] == [str(root / d) for d in ("store", "memory/daily", "run")]
    assert settings["ProtectSystem"] == ["strict"] and settings["ProtectHome"] == ["read-only"]
    assert settings["UMask"] == ["0077"] and settings["SyslogLevelPrefix"] == ["yes"]
    assert settings["RestrictAddressFamilies"] == ["AF_UNIX"], "no TCP, PostgreSQL or model"
    assert all((root / d).is_dir() for d in ("store", "memory/daily", "run"))
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    assert exposure(unit) <= 3.5


def test_a_unit_for_a_daemon_that_talks_over_ip_may_use_ip(tmp_path: Path) -> None:
    unit = installed_unit(tmp_path, '\n[llm]\nmodel = "m"\n')
    settings = unit_settings(unit)
    assert settings["RestrictAddressFamilies"] == ["AF_UNIX AF_INET AF_INET6"]
    assert "PrivateNetwork" not in settings
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    assert exposure(unit) <= 3.5


def test_uninstall_stops_and_disables_before_it_removes(tmp_path: Path) -> None:
    """With no systemd user manager to stop it, nothing is removed: the person is told
    what to do in one line, instead of being left a unit systemctl can no longer find."""
    unit = installed_unit(tmp_path)
    if shutil.which("systemctl") is None:
        pytest.skip("systemctl is not installed")
    env_without_bus = {
        "XDG_RUNTIME_DIR": str(tmp_path / "no-runtime"),
        "DBUS_SESSION_BUS_ADDRESS": "",
    }
    removed = cambium(
        "service", "uninstall", "--platform", "systemd", home=tmp_path, **env_without_bus
    )
    assert removed.returncode == 1 and unit.exists(), removed
    (line,) = removed.stderr.strip().splitlines()
    assert "cannot reach your systemd user manager" in line and f"rm {unit}" in line
    unit.unlink()
    assert cambium("service", "uninstall", home=tmp_path).returncode == 1


def test_install_now_without_a_user_bus_says_what_to_do(tmp_path: Path) -> None:
    assert cambium("init", str(tmp_path / "mem"), home=tmp_path).returncode == 0
    if shutil.which("systemctl") is None:
        pytest.skip("systemctl is not installed")
    done = cambium(
        "service", "install", "--now", "--platform", "systemd",
        "--config", str(tmp_path / "mem" / "cambium.toml"), home=tmp_path,
        XDG_RUNTIME_DIR=str(tmp_path / "no-runtime"), DBUS_SESSION_BUS_ADDRESS="",
    )  # fmt: skip
    assert done.returncode == 1, done
    (line,) = done.stderr.strip().splitlines()
    assert "cannot reach your systemd user manager" in line and "loginctl enable-linger" in line
    assert "systemctl --user daemon-reload && systemctl --user enable --now cambium" in line


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
    assert parsed["Umask"] == 0o077 and parsed["ProcessType"] == "Standard"
    assert not {"Sockets", "MachServices", "inetdCompatibility"} & set(parsed), "no network keys"
    assert "launchctl bootstrap gui/" in done.stdout


def test_service_install_needs_a_config_file(tmp_path: Path) -> None:
    done = cambium("service", "install", home=tmp_path)
    assert done.returncode == 1 and "cambium init" in done.stderr
