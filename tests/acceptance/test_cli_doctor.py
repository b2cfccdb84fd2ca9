"""``cambium doctor`` and ``cambium config show``: each of doctor's checks failing in turn
exits 1 and names what to do; all passing (a real daemon, its service unit) exits 0."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from daemon.cli.main import cli
from daemon.testing import DaemonHome, running


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DaemonHome:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CAMBIUM_CONFIG", raising=False)
    return DaemonHome(tmp_path)


def doctor(home: DaemonHome) -> Result:
    return CliRunner().invoke(cli, ["doctor", "--config", str(home.config)])


def failed(result: Result, check: str) -> str:
    """The fix doctor names for ``check``, which must have failed (and so exit 1)."""
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith(f"FAIL  {check}:"))
    fix = lines[index + 1].strip()
    assert fix.startswith("fix: "), result.output
    return fix


def test_a_config_that_does_not_load(home: DaemonHome) -> None:
    home.config.write_text("[bus]\nmax_attempts = 0\n")
    result = doctor(home)
    assert "bus.max_attempts" in result.output
    assert "fix the file and key" in failed(result, "config")


def test_no_database_says_to_upgrade(home: DaemonHome) -> None:
    assert "cambium db upgrade" in failed(doctor(home), "store")


def test_a_database_behind_the_head_revision(home: DaemonHome) -> None:
    (home.root / "cambium.db").write_bytes(b"")  # there, but never migrated
    result = doctor(home)
    assert "at revision None" in result.output
    assert "cambium db upgrade" in failed(result, "store")


def test_an_unreachable_store_server(home: DaemonHome) -> None:
    home.db_url = "postgresql+psycopg://nobody@127.0.0.1:9/none"
    home.write_config()
    assert "[store] url" in failed(doctor(home), "store")


def test_no_socket_says_to_start_the_daemon(home: DaemonHome) -> None:
    assert "cambium run" in failed(doctor(home), "daemon")


def test_a_socket_nobody_answers(home: DaemonHome) -> None:
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(home.socket))  # bound, never listening: a daemon that died
    try:
        result = doctor(home)
    finally:
        stale.close()
    assert "does not answer" in result.output
    assert "cambium run" in failed(result, "daemon")


def test_a_model_endpoint_nobody_serves(home: DaemonHome) -> None:
    home.extra_config = '[llm]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "tiny"\n'
    home.write_config()
    assert "start the model server at http://127.0.0.1:9/v1" in failed(
        doctor(home), "model endpoint"
    )


def test_no_model_check_without_llm(home: DaemonHome) -> None:
    assert "model endpoint" not in doctor(home).output


def test_a_semantic_model_that_does_not_load(home: DaemonHome) -> None:
    home.extra_config = '[recall]\nsemantic = true\nmodel = "no.onnx"\ntokenizer = "no.json"\n'
    home.write_config()
    result = doctor(home)
    assert "no such file" in result.output
    assert "[recall] model" in failed(result, "semantic model")


def test_no_service_unit_or_one_for_another_config(home: DaemonHome) -> None:
    assert "cambium service install --config" in failed(doctor(home), "service")
    unit = Path.home() / ".config" / "systemd" / "user" / "cambium.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/bin/cambium run --config /elsewhere.toml\n")
    result = doctor(home)
    assert "does not match this config" in result.output
    assert "cambium service install --config" in failed(result, "service")


@pytest.mark.subprocess
def test_everything_in_place_passes_then_the_daemon_stops(home: DaemonHome) -> None:
    env = home.env()
    home_dir = Path(env["HOME"])
    assert home_dir.parent == home.root
    installed = home.cli("service", "install")
    assert installed.returncode == 0, installed.stderr
    with running(home):
        result = CliRunner().invoke(cli, ["doctor", "--config", str(home.config), "--json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        assert report["ok"] is True
        assert [c["name"] for c in report["checks"]] == ["config", "store", "daemon", "service"]
    assert "cambium run" in failed(doctor(home), "daemon")


def test_config_show_fills_defaults_and_never_prints_secrets(home: DaemonHome) -> None:
    token = home.root / "token"
    token.write_text("s3cret-token-value-0123456789")
    token.chmod(0o600)
    home.db_url = "postgresql+psycopg://ada:hunter2@127.0.0.1:5432/test"
    home.ingress_config = f'tcp = "127.0.0.1:8765"\ntoken_file = "{token}"'
    home.extra_config = '[llm]\nmodel = "tiny"\napi_key_env = "MY_KEY"\n'
    home.write_config()
    runner = CliRunner(env={"MY_KEY": "sk-verysecret"})
    text = runner.invoke(cli, ["config", "show", "--config", str(home.config)])
    shown = runner.invoke(cli, ["config", "show", "--config", str(home.config), "--json"])
    assert text.exit_code == shown.exit_code == 0, text.output + shown.output
    for output in (text.output, shown.output):
        assert "hunter2" not in output and "s3cret" not in output and "sk-very" not in output
    effective = json.loads(shown.output)
    assert effective["store"]["url"] == "postgresql+psycopg://ada:***@127.0.0.1:5432/test"
    assert effective["ingress"]["token_file"] == str(token)
    assert effective["llm"]["api_key_env"] == "$MY_KEY"
    assert effective["bus"]["max_attempts"] == 5  # a default, filled in
    assert effective["source"] == str(home.config)
    assert "[seeds]\nwither_days = 30" in text.output
