"""Config: where it is found, how paths resolve, and errors that name the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from daemon.config import CONFIG_ENV, ConfigError, load_config, parse_config
from daemon.services.recall import semantic_recall
from daemon.store import Store

REPO = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_relative_paths_resolve_against_the_config_file(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path / "cambium.toml",
            """
workspace = "obadiah"
[store]
url = "sqlite:///data/cambium.db"
[ingress]
socket = "run/cambium.sock"
[paths]
substrate = ["memory/long-term", "SOUL.md", "~/USER.md"]
daily = "memory/daily"
""",
        )
    )
    assert config.workspace == "obadiah"
    assert config.store.url == f"sqlite:///{tmp_path}/data/cambium.db"
    assert config.ingress.socket == tmp_path / "run" / "cambium.sock"
    assert config.paths.substrate == [
        tmp_path / "memory" / "long-term",
        tmp_path / "SOUL.md",
        Path.home() / "USER.md",
    ]
    assert config.paths.daily == tmp_path / "memory" / "daily"
    assert config.source == tmp_path / "cambium.toml"


def test_environment_variable_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFIG_ENV, str(write(tmp_path / "c.toml", 'workspace = "env"\n')))
    assert load_config().workspace == "env"


def test_no_file_at_all_gives_the_embedded_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "nothing-here"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    config = load_config()
    assert config.source is None
    assert config.workspace == "default"
    assert config.timezone == "Europe/Berlin"
    assert config.store.url == f"sqlite:///{tmp_path}/data/cambium/cambium.db"
    assert config.ingress.socket.name == "cambium.sock"
    assert config.bus.max_attempts == 5
    assert config.observation.reinforce_delta == 0.2
    assert config.consolidation.extractor == "mock"
    assert config.consolidation.decay_days == 14


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"bus": {"max_attempts": 0}},
            "bus.max_attempts: Input should be greater than or equal to 1",
        ),
        ({"timezone": "Mars/Base"}, "timezone: unknown time zone 'Mars/Base'"),
        ({"store": {"uri": "x"}}, "store.uri: unknown key"),
        (
            {"ingress": {"tcp": "0.0.0.0:8765", "token_file": "t"}},
            "ingress.tcp: must be a loopback",
        ),
        ({"ingress": {"tcp": "127.0.0.1:8765"}}, "ingress: token_file is required when tcp is set"),
        ({"observation": {"reinforce_delta": "lots"}}, "observation.reinforce_delta"),
        ({"workspace": "a b"}, "workspace"),
        ({"store": {"url": "mysql://root@localhost/x"}}, "store.url: must be a sqlite"),
        ({"store": {"url": "not a url"}}, "store.url: must be a sqlite"),
        ({"recall": {"model": "m.onnx"}}, "recall: model and tokenizer are given together"),
        ({"recall": {"threads": 0}}, "recall.threads"),
        ({"recall": {"semantic": "maybe"}}, "recall.semantic"),
        ({"recall": {"min_similarity": 2}}, "recall.min_similarity"),
        ({"recall": {"embed_batch": 0}}, "recall.embed_batch"),
        ({"recall": {"embed_batch": "64"}}, "recall.embed_batch"),
        ({"recall": {"embed_batch": 1.5}}, "recall.embed_batch"),
        ({"recall": {"embed_memory_mb": 8}}, "recall.embed_memory_mb"),
    ],
)
def test_bad_values_name_the_key(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    assert message in str(exc.value)


def test_missing_and_malformed_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path / "bad.toml", "workspace = \n"))


def test_the_reference_deployment_config_loads() -> None:
    path = REPO / "deployments" / "obadiah" / "cambium.toml"
    config = load_config(path)
    names = [p.name for p in config.paths.substrate]
    assert names == ["long-term", "personal-context", "SOUL.md", "USER.md"]
    assert all(p.is_absolute() for p in config.paths.substrate)
    assert config.rhythms.templates == [path.parent / "rhythms" / "seed-review.yaml"]


def test_the_readme_config_reference_is_a_valid_config(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Configuration", 1)[1]
    block = section.split("```toml\n", 1)[1].split("```", 1)[0]
    config = load_config(write(tmp_path / "cambium.toml", block))
    assert config.workspace == "default"
    assert config.bus.max_attempts == 5 and config.ingress.tcp is None
    assert config.paths.daily == tmp_path / "memory" / "daily"


@pytest.mark.parametrize(
    ("paths", "keys"),
    [
        ({"daily": "memory/long-term"}, ["paths.daily", "paths.substrate[0]"]),
        ({"daily": "memory/long-term/daily"}, ["paths.daily", "paths.substrate[0]"]),
        ({"daily": "memory"}, ["paths.daily", "paths.substrate[0]"]),
        ({"daily": "."}, ["paths.daily", "paths.substrate[1]"]),  # contains SOUL.md
        ({"compost": "memory/long-term/compost"}, ["paths.compost", "paths.substrate[0]"]),
        ({"daily": "linked/daily"}, ["paths.daily", "paths.substrate[0]"]),  # via a symlink
    ],
)
def test_daily_or_compost_overlapping_the_substrate_is_refused_naming_the_keys(
    tmp_path: Path, paths: dict[str, str], keys: list[str]
) -> None:
    """Issue 11, finding 6: consolidation moved the user's files, notes landed inside the
    substrate."""
    (tmp_path / "memory" / "long-term").mkdir(parents=True)
    (tmp_path / "linked").symlink_to(tmp_path / "memory" / "long-term")
    raw = {"paths": {"substrate": ["memory/long-term", "SOUL.md"], **paths}}
    with pytest.raises(ConfigError) as exc:
        parse_config(raw, source=tmp_path / "cambium.toml")
    for key in keys:
        assert key in str(exc.value)
    assert "must not be, contain or lie inside" in str(exc.value)


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    token = write(tmp_path / "token", "s3cret-token-of-enough-length\n")
    config = parse_config({"ingress": {"tcp": "127.0.0.1:8765", "token_file": str(token)}})
    token.chmod(0o644)
    with pytest.raises(ConfigError, match=r"ingress.token_file: .* readable by other users"):
        config.ingress.read_token()
    token.chmod(0o600)
    assert config.ingress.read_token() == "s3cret-token-of-enough-length"


def test_importing_config_does_not_import_sqlalchemy() -> None:
    # `cambium --help` and the write commands stay light: config is imported by all of them.
    code = "import sys, daemon.config, daemon.cli.main; print('sqlalchemy' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr


def test_semantic_recall_is_off_by_default_and_its_paths_resolve(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "cambium.toml", "[paths]\n"))
    assert config.recall.semantic is False
    assert semantic_recall(config.recall, Store("sqlite://"), False) is None  # stays lexical
    assert config.recall.embeddings == tmp_path / "embeddings.sqlite"
    assert config.recall.vectors == tmp_path / "embeddings"  # .i8, .slots, .json beside it
    assert (config.recall.embed_batch, config.recall.embed_memory_mb) == (64, 64)
    given = '[recall]\nsemantic = true\nmodel = "m/model.onnx"\ntokenizer = "m/tokenizer.json"\n'
    config = load_config(write(tmp_path / "semantic.toml", given))
    assert (config.recall.model, config.recall.tokenizer) == (
        tmp_path / "m" / "model.onnx",
        tmp_path / "m" / "tokenizer.json",
    )


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[bus]\nmax_attempts = true\n", "bus.max_attempts: must be a number, not true or false"),
        ("[bus]\ngrace_period = false\n", "bus.grace_period: must be a number"),
        ("[recall]\nthreads = true\n", "recall.threads: must be a number"),
        ("[seeds]\ndigest = 1\n", "seeds.digest: must be true or false"),
        ("[recall]\nsemantic = 0\n", "recall.semantic: must be true or false"),
        ("[recall]\nembed_memory_mb = true\n", "recall.embed_memory_mb: must be a number"),
        ('[seeds]\ndigest = "yes"\n', "seeds.digest: must be true or false"),
    ],
)
def test_a_boolean_is_not_a_number_nor_a_number_a_boolean(
    tmp_path: Path, toml: str, message: str
) -> None:
    """TOML has both: pydantic alone would run `max_attempts = true` as 1 attempt."""
    with pytest.raises(ConfigError) as exc:
        load_config(write(tmp_path / "cambium.toml", toml))
    assert message in str(exc.value)


def test_numbers_and_booleans_of_the_right_kind_still_load(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path / "cambium.toml", "[bus]\ngrace_period = 5\n[seeds]\ndigest = false\n")
    )
    assert (config.bus.grace_period, config.seeds.digest) == (5.0, False)


def test_a_boolean_for_a_number_exits_2_naming_the_key(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from daemon.cli.main import cli

    config = write(tmp_path / "cambium.toml", "[bus]\nmax_attempts = true\n")
    result = CliRunner().invoke(cli, ["db", "upgrade", "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert "bus.max_attempts: must be a number" in result.output
