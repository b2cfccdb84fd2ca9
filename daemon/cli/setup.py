"""``cambium init`` and ``cambium service install|uninstall``: set up in one command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from daemon.cli.common import Failure, config_option, json_option, load, print_json

if TYPE_CHECKING:
    from daemon.config import Config
    from daemon.service_files import Sandbox

PLATFORMS = ("systemd", "launchd")
# What systemctl --user says when this shell has no user manager to talk to.
NO_USER_BUS = "Failed to connect to bus"


def _write_private(path: Path, text: str) -> None:
    """Create ``path`` readable by its owner only; never overwrite."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)


@click.command()
@click.argument(
    "directory", default=".", type=click.Path(file_okay=False, path_type=Path), metavar="[DIR]"
)
@click.option(
    "--llm",
    "llm",
    type=click.Choice(["auto", "none"]),
    help="auto: use the first model of a local model server found, without asking; "
    "none: do not look. Default: look, and ask on a terminal.",
)
@json_option
def init(directory: Path, llm: str | None, as_json: bool) -> None:
    """Set up a memory in DIR (default: here).

    Writes a commented cambium.toml and the directories it names (the store's, your notes,
    the daily log, compost, the socket's), each private to you (0700; the config 0600), and prints
    the next two commands. Nothing existing is overwritten.

    A model server already running on this machine (Ollama on port 11434, llama.cpp's
    server on 8080; loopback only) is listed, and [llm] written for it if you say so
    (--llm auto, or yes at the prompt): consolidation then extracts from natural text.

    \b
    Example:
      cambium init ~/memory && cambium run --config ~/memory/cambium.toml
      cambium init ~/memory --llm none --json
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
    text = render_config(local_timezone())
    if llm != "none":
        text = _offer_local_model(text, ask=llm is None, err=as_json)
    _write_private(config, text)
    run, install = f"cambium run --config {config}", f"cambium service install --config {config}"
    if as_json:
        made = [str(root / name) for name in LAYER_DIRECTORIES]
        print_json({"config": str(config), "directories": made, "next": [run, install]})
        return
    click.echo(f"wrote {config}")
    click.echo(f"made {', '.join(LAYER_DIRECTORIES)} in {root} (private to you)")
    click.echo("next:")
    click.echo(f"  {run}              # run it now, in the foreground")
    click.echo(f"  {install}  # or: start it with your login")


def _on_a_terminal() -> bool:
    return sys.stdin.isatty()


def _offer_local_model(text: str, ask: bool, err: bool) -> str:
    """The config ``text`` consolidating with a local model server, if one runs and the
    person wants it (asked only on a terminal: unasked, it is shown, not written). ``err``:
    say so on stderr (stdout is JSON)."""
    from daemon.cli import local_models

    def say(line: str) -> None:
        click.echo(line, err=err)

    servers = local_models.probe(local_models.USUAL_ENDPOINTS)
    for server in servers:
        listed = ", ".join(server.models)
        say(f"found {server.endpoint.name} at {server.endpoint.base_url}: {listed}")
    if not servers:
        return text
    server, model = servers[0], servers[0].models[0]
    section = local_models.llm_section(server, model)
    if ask and not _on_a_terminal():
        say("not written (pass --llm auto to have it written); to use it, add")
        say(section.strip("\n"))
        say('and set [consolidation] extractor = "openai"')
        return text
    if ask and not click.confirm(f"consolidate with {model}?", default=True, err=err):
        return text
    say(f'[llm]: {model} at {server.endpoint.base_url}; [consolidation] extractor = "openai"')
    return local_models.with_llm(text, section)


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


def sandbox_for(config: Config) -> Sandbox:
    """Exactly what the daemon run with ``config`` writes, and whether it needs IP."""
    from sqlalchemy.engine import make_url

    from daemon.config import runtime_dir
    from daemon.service_files import Sandbox

    store = make_url(config.store.url)
    writable = [config.paths.daily]
    if store.get_backend_name() == "sqlite" and store.database:
        writable.insert(0, Path(store.database).parent)  # the file, its journal and lock
    socket = config.ingress.socket.parent
    in_runtime = socket == runtime_dir()
    if not in_runtime:
        writable.append(socket)
    if config.recall.semantic:
        writable.append(config.recall.embeddings.parent)  # the cache and converted model
    network = (
        config.ingress.tcp is not None
        or store.get_backend_name() == "postgresql"
        or config.llm_configured
    )
    return Sandbox([str(p) for p in dict.fromkeys(writable)], in_runtime, network)


def _run(commands: list[list[str]], no_manager: str, err: bool) -> None:
    """Run each command; ``no_manager`` is the one line to say when systemd's user
    manager cannot be reached from here. ``err``: say what ran on stderr."""
    for command in commands:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Failure(f"`{' '.join(command)}` could not run: {exc}") from None
        if done.returncode != 0 and NO_USER_BUS in done.stderr:
            raise Failure(f"cannot reach your systemd user manager (no user bus): {no_manager}")
        if done.returncode != 0:
            raise Failure(f"`{' '.join(command)}` failed: {done.stderr.strip() or done.stdout}")
        click.echo(f"ran {' '.join(command)}", err=err)


@service.command()
@click.option("--now", is_flag=True, help="Also enable and start it.")
@_platform_option
@json_option
@config_option
def install(now: bool, platform: str, as_json: bool, config_path: Path | None) -> None:
    """Write the service file that runs `cambium run` with this config.

    Linux: ~/.config/systemd/user/cambium.service, sandboxed to write only the store,
    daily and socket directories of this config (made now if missing); macOS:
    ~/Library/LaunchAgents/com.cambium.memory.plist. With --now it is also enabled and
    started; otherwise the commands to do so are printed.

    \b
    Examples:
      cambium service install --config ~/memory/cambium.toml
      cambium service install --now --json
    """
    from daemon.service_files import service_file

    config = load(config_path)
    if config.source is None:
        raise Failure("no config file: run `cambium init DIR` first, or pass --config")
    sandbox = sandbox_for(config)
    file = service_file(
        "launchd" if platform == "launchd" else "systemd",
        _cambium_executable(),
        config.source,
        Path.home(),
        sandbox,
    )
    if file.platform == "systemd":
        for directory in sandbox.writable:  # ReadWritePaths= must exist when it starts
            Path(directory).mkdir(mode=0o700, parents=True, exist_ok=True)
    file.path.parent.mkdir(parents=True, exist_ok=True)
    file.path.write_text(file.text, encoding="utf-8")
    if not as_json:
        click.echo(f"wrote {file.path}")
    if now:
        _run(
            file.enable,
            "start it from your login session with `"
            + " && ".join(" ".join(c) for c in file.enable)
            + "` (without one, e.g. over ssh: `loginctl enable-linger $USER` first)",
            err=as_json,
        )
    if as_json:
        commands = [" ".join(command) for command in file.enable]
        print_json({"path": str(file.path), "started": now, "enable": commands})
    if now or as_json:
        return
    click.echo("enable and start it with:")
    for command in file.enable:
        click.echo(f"  {' '.join(command)}")


@service.command()
@_platform_option
@json_option
def uninstall(platform: str, as_json: bool) -> None:
    """Stop and disable the service, then remove the file `cambium service install` wrote.

    Your config and memory are left as they are. When the service manager cannot be
    reached from here, nothing is removed (exit 1), and you are told what to do.

    \b
    Example:
      cambium service uninstall
    """
    from daemon.service_files import Sandbox, service_file

    file = service_file(
        "launchd" if platform == "launchd" else "systemd",
        Path(),
        Path(),
        Path.home(),
        Sandbox((), runtime_directory=False, network=False),
    )
    if not file.path.exists():
        raise Failure(f"no service file at {file.path}")
    _run(
        file.disable,
        f"nothing was stopped or removed; run this from your login session, or, if no user "
        f"manager runs cambium, remove the unit yourself: rm {file.path}",
        err=as_json,
    )
    file.path.unlink()
    if as_json:
        print_json({"removed": str(file.path)})
    else:
        click.echo(f"removed {file.path}")
