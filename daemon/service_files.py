"""The files ``cambium init`` and ``cambium service install`` write, rendered from the
templates in ``daemon/templates/`` (the files in ``deployments/obadiah/`` are these same
templates rendered for that deployment; a test keeps them equal)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from string import Template
from typing import Literal

Platform = Literal["systemd", "launchd"]
UNIT_NAME = "cambium.service"
AGENT_LABEL = "com.cambium.memory"
DEFAULT_TIMEZONE = "Europe/Berlin"
# The directories a config made by `cambium init` names, relative to it.
LAYER_DIRECTORIES = ("store", "memory/long-term", "memory/daily", "memory/compost", "run")


def _template(name: str) -> Template:
    return Template(files("daemon").joinpath("templates", name).read_text(encoding="utf-8"))


def render_config(timezone: str) -> str:
    return _template("cambium.toml").substitute(timezone=timezone)


@dataclass(frozen=True)
class Sandbox:
    """What the service needs beyond reading: the directories it writes (the store's, the
    daily log's, the socket's), whether its socket is in the runtime directory (which
    systemd then makes, private, at each start) and whether it talks over IP at all."""

    writable: Sequence[str]
    runtime_directory: bool
    network: bool


def render_unit(cambium: str, config: str, sandbox: Sandbox) -> str:
    writable = "".join(f"ReadWritePaths={path}\n" for path in sandbox.writable)
    if sandbox.runtime_directory:
        writable += "RuntimeDirectory=cambium\nRuntimeDirectoryMode=0700\n"
    network = (
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\n"
        if sandbox.network
        else "RestrictAddressFamilies=AF_UNIX\nPrivateNetwork=yes\n"
    )
    return _template(UNIT_NAME).substitute(
        cambium=cambium, config=config, writable=writable, network=network
    )


def render_agent(cambium: str, config: str, logs: str) -> str:
    # Values go into XML: escape what XML would read as markup.
    def xml(value: str) -> str:
        return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    return _template(f"{AGENT_LABEL}.plist").substitute(
        cambium=xml(cambium), config=xml(config), logs=xml(logs)
    )


def local_timezone() -> str:
    """The machine's IANA time zone name, when it can be told; else the default."""
    from zoneinfo import available_timezones

    name = os.environ.get("TZ", "").lstrip(":")
    if not name:
        try:
            name = str(Path("/etc/localtime").resolve()).partition("/zoneinfo/")[2]
        except OSError:
            name = ""
    return name if name in available_timezones() else DEFAULT_TIMEZONE


@dataclass(frozen=True)
class ServiceFile:
    platform: Platform
    path: Path
    text: str
    enable: list[list[str]]  # commands that load and start it
    disable: list[list[str]]  # commands that stop and unload it


def service_file(
    platform: Platform, cambium: Path, config: Path, home: Path, sandbox: Sandbox
) -> ServiceFile:
    """The unit or agent that runs ``cambium run --config CONFIG`` for this user."""
    if platform == "systemd":
        # systemd splits ExecStart and ReadWritePaths on spaces: quote paths that have them.
        def arg(path: Path | str) -> str:
            return f'"{path}"' if " " in str(path) else str(path)

        quoted = Sandbox(
            [arg(p) for p in sandbox.writable], sandbox.runtime_directory, sandbox.network
        )
        return ServiceFile(
            platform,
            home / ".config" / "systemd" / "user" / UNIT_NAME,
            render_unit(arg(cambium), arg(config), quoted),
            enable=[
                ["systemctl", "--user", "daemon-reload"],
                ["systemctl", "--user", "enable", "--now", "cambium"],
            ],
            disable=[["systemctl", "--user", "disable", "--now", "cambium"]],
        )
    path = home / "Library" / "LaunchAgents" / f"{AGENT_LABEL}.plist"
    domain = f"gui/{os.getuid()}"
    return ServiceFile(
        platform,
        path,
        render_agent(str(cambium), str(config), str(home / "Library" / "Logs")),
        enable=[["launchctl", "bootstrap", domain, str(path)]],
        disable=[["launchctl", "bootout", f"{domain}/{AGENT_LABEL}"]],
    )
