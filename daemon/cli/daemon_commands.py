"""The daemon's own commands: run it, ask its status, emit a signal to it, upgrade its
database."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from daemon.cli.common import (
    BadInput,
    Failure,
    Number,
    Unreachable,
    config_option,
    json_option,
    load,
    print_json,
    store_failures,
)
from daemon.config_file import ConfigError


@click.command()
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
    from daemon.process import event_loop_options, run_daemon
    from daemon.server import IngressConfigError, IngressError
    from daemon.store import StoreCorrupt, StoreInUse
    from daemon.store.migrate import MigrationFailed

    config = load(config_path)
    configure_logging(config.log.level)
    try:
        with store_failures(config.store.url, "cannot run on"):
            anyio.run(run_daemon, config, backend_options=event_loop_options())
    except (ConfigError, IngressConfigError) as exc:
        raise BadInput(f"bad config: {exc}") from None
    except (IngressError, MigrationFailed, StoreInUse, StoreCorrupt) as exc:
        raise Failure(str(exc)) from None


@click.command()
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
    from daemon.cli.client import ask, daemon_socket

    socket = daemon_socket(config_path)
    health = ask(socket, "/v1/health")
    if health is None:
        raise Unreachable(f"daemon not reachable at {socket} — start it with `cambium run`")
    if as_json:
        print_json(health)
    else:
        from daemon.cli.render import show, status_view

        show(status_view(health, socket))
    if health["status"] != "ok":
        problem = health.get("problem")
        raise Failure(f"the daemon is {health['status']}" + (f": {problem}" if problem else ""))


@click.command()
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


@click.group()
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
    from alembic.util import CommandError

    from daemon.store.migrate import current_revision
    from daemon.store.migrate import upgrade as apply

    config = load(config_path)
    with store_failures(config.store.url, "cannot upgrade", also=(OSError, CommandError)):
        apply(config.store.url, progress=lambda line: click.echo(line, err=True))
        click.echo(f"database at revision {current_revision(config.store.url)}")
