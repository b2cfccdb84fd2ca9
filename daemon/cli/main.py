"""``cambium``: run the daemon, and read and review its memory from the terminal.

Exit codes: 0 ok; 1 failed; 2 bad input; 3 daemon not reachable; 4 a write was sent but
no answer came (it may be stored: re-run it with the printed ``--idempotency-key``).

Read commands (``memory recall``, ``memory seeds``, ``memory substrate``, ``signals``)
read the store and the files directly, daemon running or not. Write commands (``emit``,
``memory mark|note|consolidate``, ``memory seeds accept|reject``, ``signals retry``) and
``status`` talk to the daemon over its Unix socket.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from daemon.cli import archive, completion, config_show, doctor, governance
from daemon.cli.common import (
    BadInput,
    Failure,
    Number,
    config_option,
    json_option,
    load,
    login_name,
    print_json,
    store_failures,
)
from daemon.cli.index import index
from daemon.cli.loom import loom
from daemon.cli.mcp import mcp
from daemon.cli.memory import memory
from daemon.cli.setup import init, service
from daemon.cli.signals import signals
from daemon.config import ConfigError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cambium-memory", prog_name="cambium")
def cli() -> None:
    """Cambium Memory: a local daemon that gives your assistant a memory that lasts.

    Exit codes: 0 ok, 1 failed, 2 bad input, 3 daemon not reachable, 4 sent but outcome
    unknown (re-run with the printed --idempotency-key).
    """


cli.add_command(memory)
cli.add_command(signals)
memory.add_command(governance.correct)
memory.add_command(governance.retract)
memory.add_command(governance.forget)
memory.add_command(governance.tombstones)
cli.add_command(archive.export)
cli.add_command(archive.import_archive)
cli.add_command(index)
cli.add_command(loom)
cli.add_command(mcp)
cli.add_command(init)
cli.add_command(service)
cli.add_command(config_show.config)
cli.add_command(doctor.doctor)
cli.add_command(completion.completion)


@cli.command()
@config_option
def run(config_path: Path | None) -> None:
    """Run the daemon in the foreground (systemd and launchd supervise it; it never forks).

    \b
    Example:
      cambium run --config ~/.config/cambium/cambium.toml
    """
    import anyio

    # structlog imports rich (a CLI dependency) whenever it is installed, only to pretty-print
    # tracebacks; the daemon never needs it, and it would cost the long-running process ~6 MB.
    sys.modules.setdefault("rich", None)  # type: ignore[arg-type]
    from daemon.logs import configure_logging
    from daemon.process import run_daemon
    from daemon.server import IngressConfigError, IngressError
    from daemon.store import StoreCorrupt, StoreInUse
    from daemon.store.migrate import MigrationFailed

    config = load(config_path)
    configure_logging(config.log.level)
    try:
        with store_failures(config.store.url, "cannot run on"):
            anyio.run(run_daemon, config)
    except (ConfigError, IngressConfigError) as exc:
        raise BadInput(f"bad config: {exc}") from None
    except (IngressError, MigrationFailed, StoreInUse, StoreCorrupt) as exc:
        raise Failure(str(exc)) from None


@cli.command()
@json_option
@config_option
def status(as_json: bool, config_path: Path | None) -> None:
    """Is the daemon up, and what is it doing?

    Version, uptime, receptors, pending and dead deliveries, the next fire of each
    rhythm, the watched substrate files. Exit 3 when the daemon is not reachable.

    \b
    Examples:
      cambium status
      cambium status --json
    """
    from daemon.cli.client import daemon

    config = load(config_path)
    with daemon(config, login_name()) as client:
        health = client.health().model_dump(mode="json")
    if as_json:
        print_json(health)
    else:
        from daemon.cli.render import show, status_view

        show(status_view(health, config.ingress.socket))
    if health["status"] != "ok":
        problem = health.get("problem")
        raise Failure(f"the daemon is {health['status']}" + (f": {problem}" if problem else ""))


@cli.command()
@click.argument("signal_type", metavar="TYPE")
@click.option("--payload", required=True, help="The payload: a JSON object.")
@click.option("--source-id", required=True, help="Who emits it (an agent or script name).")
@click.option("--intensity", type=Number(0, 1), help="0..1 (default 0.7).")
@click.option("--decay-days", type=Number(0), help="Half-life in days; 0 never fades (default 14).")
@click.option("--affinity", multiple=True, help="A tag; repeat it or give a comma list (a,b).")
@click.option("--workspace", help="Workspace id (default: the configured one).")
@click.option("--idempotency-key", help="Emit at most once per key; a repeat is a duplicate.")
@click.option(
    "--allow-unrouted",
    is_flag=True,
    help="Store it though no receptor binds TYPE (otherwise refused, exit 2).",
)
@click.option(
    "--wait",
    type=Number(0, 30),
    default=10,
    show_default=True,
    help="Seconds to wait for the deliveries (0: return once stored).",
)
@json_option
@config_option
def emit(
    signal_type: str,
    payload: str,
    source_id: str,
    intensity: float | None,
    decay_days: float | None,
    affinity: tuple[str, ...],
    workspace: str | None,
    idempotency_key: str | None,
    allow_unrouted: bool,
    wait: float,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """Emit a signal, as an agent or script would.

    The signal of TYPE is stored durably, then delivered; this waits for the deliveries
    and exits 1 if one is dead. A payload its receptor would refuse, or a TYPE no receptor
    binds (without --allow-unrouted), is refused with exit 2 and not stored.

    \b
    Examples:
      cambium emit memory.observation --source-id agent-chat \\
        --payload '{"subject": "user.food.lunch", "observation": "likes lentil soup",
                    "evidence": {"note": "said so in chat"}}'
      cambium emit memory.consolidate --source-id cron --payload '{"date": "2026-01-15"}' \\
        --idempotency-key consolidate:2026-01-15 --wait 0
    """
    from daemon.cli.client import check_deliveries, daemon

    try:
        parsed_payload = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise BadInput(f"bad --payload: not valid JSON: {exc}") from None
    with daemon(load(config_path), source_id) as client:
        answer = client.emit(
            signal_type,
            parsed_payload,
            intensity=intensity,
            decay_days=decay_days,
            affinity=[tag.strip() for tags in affinity for tag in tags.split(",") if tag.strip()],
            workspace=workspace,
            idempotency_key=idempotency_key,
            wait=wait,
            allow_unrouted=allow_unrouted,
        )
        shown = answer.model_dump(mode="json", exclude_none=True)
        if as_json:
            print_json(shown)
        else:
            from daemon.cli.render import show, stored

            show(stored(shown, signal_type))
        check_deliveries(client, answer.id, answer.deliveries)


@cli.group()
def db() -> None:
    """The database."""


@db.command()
@config_option
def upgrade(config_path: Path | None) -> None:
    """Apply schema migrations (the daemon also applies them at start).

    \b
    Example:
      cambium db upgrade
    """
    from daemon.store.migrate import current_revision
    from daemon.store.migrate import upgrade as apply

    config = load(config_path)
    with store_failures(config.store.url, "cannot upgrade", also=(OSError,)):
        apply(config.store.url, progress=lambda line: click.echo(line, err=True))
        click.echo(f"database at revision {current_revision(config.store.url)}")


def main() -> None:
    cli(prog_name="cambium")
