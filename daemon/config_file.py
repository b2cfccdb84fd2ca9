"""The config file before its models: where it is (``--config``, then ``$CAMBIUM_CONFIG``,
then the user config directory), its TOML, the platform's directories, how a path in it
resolves, and the two settings a client needs: the daemon's socket, and the time zone
times are shown in.

Light on purpose (the standard library, platformdirs and the core's clock): a command that
only talks to the running daemon (``cambium status``, a recall the daemon answers,
``cambium mcp``) finds them here without importing pydantic; :mod:`daemon.config` checks
everything else.
"""

from __future__ import annotations

import os
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import platformdirs

from daemon.core.clock import known_zone

APP = "cambium"
CONFIG_ENV = "CAMBIUM_CONFIG"
SOCKET_NAME = "cambium.sock"
DEFAULT_TIMEZONE = "Europe/Berlin"


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


@dataclass(frozen=True)
class ClientSettings:
    socket: Path  # where the daemon listens
    zone: ZoneInfo  # the zone a person reads times in


def client_settings(explicit: Path | None) -> ClientSettings:
    """Where the daemon of this config listens, and its time zone, read from the file
    alone: only ``ingress.socket`` and ``timezone`` are looked at (the daemon checked its
    whole config when it started)."""
    path = find_config_file(explicit)
    if path is None:
        return ClientSettings(daemon_socket(None, data_dir()), known_zone(DEFAULT_TIMEZONE))
    raw = read_config_file(path)
    where = path.expanduser()
    ingress = raw.get("ingress", {})
    socket = ingress.get("socket") if isinstance(ingress, dict) else None
    if socket is not None and not isinstance(socket, str):
        raise ConfigError(f"{where}: ingress.socket: must be a path (a string)")
    zone = raw.get("timezone", DEFAULT_TIMEZONE)
    try:
        if not isinstance(zone, str):
            raise ValueError("must be an IANA time zone name (a string)")
        known = known_zone(zone)
    except ValueError as exc:
        raise ConfigError(f"{where}: timezone: {exc}") from None
    base = where.resolve().parent
    return ClientSettings(daemon_socket(Path(socket) if socket else None, base), known)


def socket_path(explicit: Path | None) -> Path:
    """Where the daemon of this config listens (see :func:`client_settings`)."""
    return client_settings(explicit).socket
