"""``cambium init`` notices a local model server (Ollama, llama.cpp's server) on loopback,
lists its models and writes ``[llm]`` when asked to; with nothing listening its output and
config are today's. The probed ports are the scripted chat server's, injected."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_server import ChatServer, chat_server
from click.testing import CliRunner, Result

from daemon.cli import local_models, setup
from daemon.cli.main import cli
from daemon.config import load_config


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as running:
        running.models = ["gemma3-270m", "qwen2.5-0.5b"]
        yield running


def port_of(server: ChatServer) -> int:
    return int(server.url.rsplit(":", 1)[1].split("/")[0])


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def init(
    monkeypatch: pytest.MonkeyPatch, directory: Path, *endpoints: local_models.Endpoint, **kw: str
) -> Result:
    monkeypatch.setattr(local_models, "USUAL_ENDPOINTS", endpoints)
    typed = kw.pop("input", None)
    args = ["init", str(directory), *(f"--{k}={v}" for k, v in kw.items())]
    return CliRunner().invoke(cli, args, input=typed, catch_exceptions=False)


def test_with_nothing_listening_init_is_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nothing = (local_models.Endpoint("Ollama", closed_port(), "ollama"),)
    probed = init(monkeypatch, tmp_path / "a", *nothing)
    unprobed = init(monkeypatch, tmp_path / "b", *nothing, llm="none")
    assert probed.exit_code == unprobed.exit_code == 0
    assert probed.output.replace("/a", "/b") == unprobed.output
    assert (tmp_path / "a/cambium.toml").read_text() == (tmp_path / "b/cambium.toml").read_text()


def test_llm_auto_writes_llm_for_the_first_model_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ChatServer
) -> None:
    found = local_models.Endpoint("llama.cpp server", port_of(server), "openai")
    done = init(monkeypatch, tmp_path, found, llm="auto")
    assert done.exit_code == 0
    assert f"found llama.cpp server at {server.url}: gemma3-270m, qwen2.5-0.5b" in done.output
    config = load_config(tmp_path / "cambium.toml")
    assert (config.llm.base_url, config.llm.model) == (server.url, "gemma3-270m")
    assert config.consolidation.extractor == "openai"


def test_unasked_off_a_terminal_the_server_is_listed_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ChatServer
) -> None:
    ollama = local_models.Endpoint("Ollama", port_of(server), "ollama")
    done = init(monkeypatch, tmp_path, ollama)
    assert done.exit_code == 0
    assert "found Ollama at" in done.output and "pass --llm auto" in done.output
    assert 'model = "gemma3-270m"' in done.output
    assert load_config(tmp_path / "cambium.toml").consolidation.extractor == "mock"


@pytest.mark.parametrize(("answer", "extractor"), [("y\n", "openai"), ("n\n", "mock")])
def test_on_a_terminal_init_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ChatServer, answer: str, extractor: str
) -> None:
    monkeypatch.setattr(setup, "_on_a_terminal", lambda: True)
    found = local_models.Endpoint("llama.cpp server", port_of(server), "openai")
    done = init(monkeypatch, tmp_path, found, input=answer)
    assert done.exit_code == 0 and "consolidate with gemma3-270m?" in done.output
    assert load_config(tmp_path / "cambium.toml").consolidation.extractor == extractor


def test_a_port_answering_something_else_is_no_model_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ChatServer
) -> None:
    server.models = []
    wrong = local_models.Endpoint("llama.cpp server", port_of(server), "openai")
    assert local_models.probe([wrong]) == []
    server.models = ["m"]
    assert local_models.probe([local_models.Endpoint("x", port_of(server), "ollama")])


def test_a_model_name_toml_would_misread_is_written_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ChatServer
) -> None:
    server.models = ['odd "name"\\']
    found = local_models.Endpoint("llama.cpp server", port_of(server), "openai")
    assert init(monkeypatch, tmp_path, found, llm="auto").exit_code == 0
    assert load_config(tmp_path / "cambium.toml").llm.model == 'odd "name"\\'
