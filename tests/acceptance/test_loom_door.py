"""How Loom is reached: ``cambium loom``'s loopback door with its one-time link, and the
TCP ingress behind the bearer token. The real daemon, the real CLI as a subprocess."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from daemon.testing import CAMBIUM, DaemonHome, running

pytestmark = pytest.mark.subprocess  # starts `cambium` as a subprocess

TOKEN = "loom-door-token-0123456789"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def home(tmp_path: Path) -> Iterator[DaemonHome]:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    home = DaemonHome(tmp_path / "home")
    home.ingress_config = f'tcp = "127.0.0.1:{free_port()}"\ntoken_file = "{token}"\n'
    home.write_config()
    with running(home):
        yield home


def open_door(home: DaemonHome, *args: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [CAMBIUM, "loom", "--print-url", "--config", str(home.config), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=home.env(),
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    assert first.startswith("Loom: http://127.0.0.1:"), first + (process.stderr.read() or "")
    return process, first.removeprefix("Loom: ").strip()


def test_the_door_admits_the_first_browser_with_the_link_and_nobody_else(
    home: DaemonHome,
) -> None:
    process, link = open_door(home)
    try:
        base = link.split("?")[0]
        assert httpx.get(base).status_code == 401
        with httpx.Client() as browser:
            entered = browser.get(link)
            assert entered.status_code == 303 and entered.headers["location"] == "/loom/"
            cookie = entered.headers["set-cookie"]
            assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/loom" in cookie
            page = browser.get(base.replace("/loom/", "/loom/health"))
            assert page.status_code == 200 and "<h1>Health</h1>" in page.text
            assert "default-src 'none'" in page.headers["content-security-policy"]
            # Only Loom is reachable through the door, not the JSON API.
            api = browser.get(base.replace("/loom/", "/v1/health"))
            assert api.status_code == 404
        spent = httpx.get(link)
        assert spent.status_code == 403 and "run `cambium loom` again" in spent.text
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(20) == 0


def test_the_door_says_so_when_the_daemon_goes_away(home: DaemonHome) -> None:
    process, link = open_door(home)
    try:
        with httpx.Client() as browser:
            browser.get(link)
            home.stop()
            gone = browser.get(link.split("?")[0])
        assert gone.status_code == 502 and "start it with `cambium run`" in gone.text
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0


def test_cambium_loom_without_a_daemon_exits_3(tmp_path: Path) -> None:
    home = DaemonHome(tmp_path)
    result = home.cli("loom", "--print-url")
    assert result.returncode == 3
    assert "daemon not reachable" in result.stderr and result.stdout == ""


def test_cambium_loom_refuses_a_bad_port(tmp_path: Path) -> None:
    result = DaemonHome(tmp_path).cli("loom", "--port", "70000")
    assert result.returncode == 2 and "--port" in result.stderr


def test_loom_on_the_tcp_ingress_needs_the_bearer_token(home: DaemonHome) -> None:
    tcp = home.config.read_text().split('tcp = "')[1].split('"')[0]
    assert httpx.get(f"http://{tcp}/loom/").status_code == 401
    page = httpx.get(f"http://{tcp}/loom/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert page.status_code == 200 and "<h1>Marks</h1>" in page.text


def test_the_door_closes_itself_when_idle(home: DaemonHome) -> None:
    process, link = open_door(home, "--idle-minutes", "0.1")
    assert process.wait(30) == 0  # six seconds without a request
    with pytest.raises(httpx.ConnectError):
        httpx.get(link)
