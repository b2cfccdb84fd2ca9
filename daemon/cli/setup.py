"""``cambium init`` and ``cambium service install|uninstall``: set up in one command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import click

from daemon.cli.common import Failure, config_option, load

PLATFORMS = ("systemd", "launchd")


def _write_private(path: Path, text: str) -> None:
    """Create ``path`` readable by its owner only; never overwrite."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)


@click.command()
@click.argument(
    "directory", default=".", type=click.Path(file_okay=False, path_type=Path), metavar="[DIR]"
)
def init(directory: Path) -> None:
    """Set up a memory in DIR (default: here).

    Writes a commented cambium.toml and the directories it names (your notes, the daily
    log, compost, the socket's), each private to you (0700; the config 0600), and prints
    the next two commands. Nothing existing is overwritten.

    \b
    Example:
      cambium init ~/memory && cambium run --config ~/memory/cambium.toml
    """
    from daemon.service_files import LAYER_DIRECTORIES, local_timezone, render_config

    root = directory.expanduser().absolute()
    config = root / "cambium.toml"
    if config.exists():
        raise Failure(f"{config} already exists: edit it, or init another directory")
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name in LAYER_DIRECTORIES:
        layer = root / name
        if not layer.exists():
            layer.mkdir(mode=0o700, parents=True)
            layer.chmod(0o700)  # whatever the umask
    _write_private(config, render_config(local_timezone()))
    click.echo(f"wrote {config}")
    click.echo(f"made {', '.join(LAYER_DIRECTORIES)} in {root} (private to you)")
    click.echo("next:")
    click.echo(f"  cambium run --config {config}              # run it now, in the foreground")
    click.echo(f"  cambium service install --config {config}  # or: start it with your login")


@click.group()
def service() -> None:
    """Run the daemon as a service of your login (systemd user unit, launchd agent)."""


def _platform_option(func: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--platform",
        type=click.Choice(PLATFORMS),
        default="launchd" if sys.platform == "darwin" else "systemd",
        show_default="launchd on macOS, else systemd",
        help="Which service manager to write for.",
    )(func)


def _cambium_executable() -> Path:
    """The ``cambium`` being run now (so the service runs the same install)."""
    invoked = Path(sys.argv[0])
    if invoked.name == "cambium" and invoked.exists():
        return invoked.absolute()
    found = shutil.which("cambium")
    if found is None:
        raise Failure("cannot find the cambium executable on PATH")
    return Path(found).absolute()


def _run(commands: list[list[str]]) -> None:
    for command in commands:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Failure(f"`{' '.join(command)}` could not run: {exc}") from None
        if done.returncode != 0:
            raise Failure(f"`{' '.join(command)}` failed: {done.stderr.strip() or done.stdout}")
        click.echo(f"ran {' '.join(command)}")


@service.command()
@click.option("--now", is_flag=True, help="Also enable and start it.")
@_platform_option
@config_option
def install(now: bool, platform: str, config_path: Path | None) -> None:
    """Write the service file that runs `cambium run` with this config.

    Linux: ~/.config/systemd/user/cambium.service; macOS:
    ~/Library/LaunchAgents/com.cambium.memory.plist. With --now it is also enabled and
    started; otherwise the commands to do so are printed.

    \b
    Examples:
      cambium service install --config ~/memory/cambium.toml
      cambium service install --now
    """
    from daemon.service_files import service_file

    config = load(config_path)
    if config.source is None:
        raise Failure("no config file: run `cambium init DIR` first, or pass --config")
    file = service_file(
        "launchd" if platform == "launchd" else "systemd",
        _cambium_executable(),
        config.source,
        Path.home(),
    )
    file.path.parent.mkdir(parents=True, exist_ok=True)
    file.path.write_text(file.text, encoding="utf-8")
    click.echo(f"wrote {file.path}")
    if now:
        _run(file.enable)
        return
    click.echo("enable and start it with:")
    for command in file.enable:
        click.echo(f"  {' '.join(command)}")


@service.command()
@click.option("--now", is_flag=True, help="Also stop and disable it first.")
@_platform_option
def uninstall(now: bool, platform: str) -> None:
    """Remove the service file written by `cambium service install`.

    With --now the service is stopped and disabled first; otherwise the commands to do
    so are printed. Your config and memory are left as they are.

    \b
    Example:
      cambium service uninstall --now
    """
    from daemon.service_files import service_file

    file = service_file(
        "launchd" if platform == "launchd" else "systemd", Path(), Path(), Path.home()
    )
    if not file.path.exists():
        raise Failure(f"no service file at {file.path}")
    if now:
        _run(file.disable)
    file.path.unlink()
    click.echo(f"removed {file.path}")
    if not now:
        click.echo("if it is still running, stop it with:")
        for command in file.disable:
            click.echo(f"  {' '.join(command)}")
