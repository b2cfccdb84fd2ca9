"""``cambium config show``: the configuration in effect, every section with its defaults
filled in and its paths resolved. Secrets are never printed: a token or API key is shown by
where it comes from (its file, its environment variable), and a password in the store's URL
is masked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

from daemon.cli.common import config_option, json_option, load, print_json

# ``scheme://user:password@host``: the password part.
_URL_PASSWORD = re.compile(r"^(?P<head>[a-z0-9+]+://[^:/@]*):[^@/]*@")
MASK = "***"


def masked_url(url: str) -> str:
    return _URL_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@", url)


def effective(config_path: Path | None) -> dict[str, Any]:
    """The loaded configuration as plain data, with the secrets replaced by their source."""
    config = load(config_path)
    shown = config.model_dump(mode="json", exclude={"source"})
    shown["store"]["url"] = masked_url(config.store.url)
    llm = shown["llm"]
    if config.llm.api_key_env:
        llm["api_key_env"] = f"${config.llm.api_key_env}"
    return {"source": str(config.source) if config.source else None, **shown}


def _toml_value(value: Any) -> str:
    # JSON strings, numbers, booleans and lists are TOML values too.
    return json.dumps(value, ensure_ascii=False)


def as_text(shown: dict[str, Any]) -> str:
    source = shown["source"]
    lines = [f"# from {source}" if source else "# no config file: the defaults"]
    top = {k: v for k, v in shown.items() if k != "source" and not isinstance(v, dict)}
    lines += [f"{key} = {_toml_value(value)}" for key, value in top.items()]
    for name, section in shown.items():
        if not isinstance(section, dict):
            continue
        lines += ["", f"[{name}]"]
        for key, value in section.items():
            lines.append(f"# {key}: not set" if value is None else f"{key} = {_toml_value(value)}")
    return "\n".join(lines)


@click.group()
def config() -> None:
    """The configuration."""


@config.command()
@json_option
@config_option
def show(as_json: bool, config_path: Path | None) -> None:
    """Print the configuration in effect: every section, defaults filled in, paths absolute.

    Secrets are never printed: ingress.token_file and llm.api_key_file are shown as the
    files they are read from, llm.api_key_env as the variable, and a store password as ***.

    \b
    Examples:
      cambium config show
      cambium config show --json
    """
    shown = effective(config_path)
    if as_json:
        print_json(shown)
    else:
        click.echo(as_text(shown))
