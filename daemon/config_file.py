"""The config file before its models: where it is (``--config``, then ``$CAMBIUM_CONFIG``,
then the user config directory), its TOML, the platform's directories, how a path in it
resolves, and the one setting a client needs, the daemon's socket.

Light on purpose (the standard library and platformdirs): a command that only talks to the
running daemon (``cambium status``, a recall the daemon answers, ``cambium mcp``) finds the
socket here without importing pydantic; :mod:`daemon.config` checks everything else.
"""

from __future__ import annotations

import os
import tomllib
import warnings
from pathlib import Path
from typing import Any

import platformdirs

APP = "cambium"
CONFIG_ENV = "CAMBIUM_CONFIG"
SOCKET_NAME = "cambium.sock"


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the key and the rule."""


def data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP))


def runtime_dir() -> Path:
    with warnings.catch_warnings():  # platformdirs warns when it falls back to /tmp
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir(APP))


def user_config_file() -> Path:
    return Path(platformdirs.user_config_dir(APP)) / "cambium.toml"


def find_config_file(explicit: Path | None) -> Path | None:
    if explicit is not None:
        return explicit
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV])
    candidate = user_config_file()
    return candidate if candidate.is_file() else None


def read_config_file(path: Path) -> dict[str, Any]:
    """The TOML of ``path`` (``~`` expanded); a missing, unreadable or malformed file is a
    :class:`ConfigError` naming it."""
    path = path.expanduser()
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def resolve_path(path: Path, base: Path) -> Path:
    """A configured path: ``~`` expanded, a relative one taken from ``base`` (the config
    file's directory)."""
    path = path.expanduser()
    return path if path.is_absolute() else (base / path).absolute()


def daemon_socket(configured: Path | None, base: Path) -> Path:
    """``ingress.socket`` resolved; not given (or empty), the user runtime directory's."""
    if configured is None or configured == Path():
        return runtime_dir() / SOCKET_NAME
    return resolve_path(configured, base)


def socket_path(explicit: Path | None) -> Path:
    """Where the daemon of this config listens, read from the file alone. Only
    ``ingress.socket`` is looked at: the daemon checked its whole config when it started."""
    path = find_config_file(explicit)
    if path is None:
        return daemon_socket(None, data_dir())
    raw = read_config_file(path)
    ingress = raw.get("ingress", {})
    value = ingress.get("socket") if isinstance(ingress, dict) else None
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{path.expanduser()}: ingress.socket: must be a path (a string)")
    return daemon_socket(Path(value) if value else None, path.expanduser().resolve().parent)
