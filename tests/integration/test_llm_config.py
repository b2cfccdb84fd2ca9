"""The [llm] table: defaults, errors naming the key, and a key that never sits in the config."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.composition import make_extractor
from daemon.config import ConfigError, parse_config
from daemon.llm import chat_client
from receptors.extractors import MockExtractor
from receptors.llm.extractor import OpenAIExtractor


def test_defaults_point_at_a_local_server_and_keep_the_mock_extractor() -> None:
    config = parse_config({})
    assert config.llm.base_url == "http://127.0.0.1:8080/v1"
    assert config.llm.api_key_env is None and config.llm.api_key_file is None
    assert not config.llm_configured
    assert isinstance(make_extractor(config), MockExtractor)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"consolidation": {"extractor": "openai"}}, "llm.model is required"),
        ({"llm": {"base_url": "ftp://host/v1"}}, "llm.base_url"),
        ({"llm": {"api_key": "sk-secret"}}, "llm.api_key: unknown key"),
        ({"llm": {"api_key_env": "NOT A NAME"}}, "llm.api_key_env"),
        ({"llm": {"timeout": 0}}, "llm.timeout"),
        ({"llm": {"max_lines_per_call": 20, "overlap_lines": 15}}, "overlap_lines"),
        ({"llm": {"api_key_env": "K", "api_key_file": "k"}}, "not both"),
        ({"observation": {"similarity": 1.5}}, "observation.similarity"),
    ],
)
def test_bad_llm_settings_are_refused_naming_the_key(raw: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_config(raw)


def test_the_key_comes_from_the_named_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_LLM_KEY", "sk-from-env-0123456789")
    config = parse_config(
        {
            "consolidation": {"extractor": "openai"},
            "llm": {"model": "m", "api_key_env": "MY_LLM_KEY", "max_lines_per_call": 40},
        }
    )
    extractor = make_extractor(config)
    assert isinstance(extractor, OpenAIExtractor)
    assert extractor.client.api_key == "sk-from-env-0123456789"
    assert extractor.max_lines_per_call == 40
    monkeypatch.delenv("MY_LLM_KEY")
    with pytest.raises(ValueError, match=r"llm\.api_key_env: .*MY_LLM_KEY is not set"):
        make_extractor(config)


def test_a_key_file_must_be_private_to_its_owner(tmp_path: Path) -> None:
    key_file = tmp_path / "llm.key"
    key_file.write_text("sk-from-file-0123456789\n")
    key_file.chmod(0o644)
    config = parse_config({"llm": {"model": "m", "api_key_file": str(key_file)}})
    with pytest.raises(ValueError, match=r"llm\.api_key_file: .*owner only \(chmod 600\)"):
        chat_client(config.llm)
    key_file.chmod(0o600)
    assert chat_client(config.llm).api_key == "sk-from-file-0123456789"


def test_a_relative_key_file_resolves_against_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "cambium.toml").write_text("")
    config = parse_config(
        {"llm": {"model": "m", "api_key_file": "secrets/llm.key"}},
        source=tmp_path / "cambium.toml",
    )
    assert config.llm.api_key_file == tmp_path / "secrets" / "llm.key"
