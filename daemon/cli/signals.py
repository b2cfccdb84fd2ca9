"""``cambium signals``: the signal log (the audit trail of the memory), one signal in full,
retrying dead deliveries and discarding them. Listing and showing read the store directly;
a retry or a discard goes through the daemon, which does the delivering."""

from __future__ import annotations

from pathlib import Path

import click

from daemon.cli.common import (
    BadInput,
    Failure,
    config_option,
    json_option,
    load,
    login_name,
    print_json,
    reading_store,
    remember_config,
)

STATUSES = ("pending", "dead", "delivered", "discarded", "unrouted")


@click.group(invoke_without_command=True)
@click.option(
    "--status",
    type=click.Choice(STATUSES),
    help="Signals with a delivery in this status (unrouted: no receptor binds the type).",
)
@click.option("--type", "signal_type", metavar="T", help="Only signals of this type.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@json_option
@config_option
@click.pass_context
def signals(
    ctx: click.Context,
    status: str | None,
    signal_type: str | None,
    limit: int,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """The signal log: list signals, show one, retry one.

    Lists signals newest first, with each delivery's status.

    \b
    Examples:
      cambium signals
      cambium signals --status dead
      cambium signals --type memory.observation --limit 5 --json
      cambium signals show 0f8e1c...
      cambium signals retry 0f8e1c...
      cambium signals discard 0f8e1c...
    """
    remember_config(ctx, config_path)
    if ctx.invoked_subcommand is not None:
        return
    with reading_store(load(config_path)) as store:
        listed = store.read_sync(
            lambda tx: tx.signals.listing(status=status, signal_type=signal_type, limit=limit)
        )
    found = [summary.to_json() for summary in listed]
    if as_json:
        print_json(found)
        return
    from daemon.cli.render import show, signals_view

    show(signals_view(found))


@signals.command("show")
@click.argument("signal_id", metavar="ID")
@json_option
@config_option
def show_signal(signal_id: str, as_json: bool, config_path: Path | None) -> None:
    """One signal in full: its fields, payload and every delivery (attempts, last error).

    \b
    Example:
      cambium signals show 0f8e1c... --json
    """
    with reading_store(load(config_path)) as store:
        stored = store.read_sync(lambda tx: tx.signals.get(signal_id))
    if stored is None:
        raise Failure(f"no signal {signal_id}")
    found = stored.to_json()
    if as_json:
        print_json(found)
        return
    from daemon.cli.render import show, signal_detail

    show(signal_detail(found))


@signals.command()
@click.argument("signal_id", metavar="ID")
@json_option
@config_option
def retry(signal_id: str, as_json: bool, config_path: Path | None) -> None:
    """Deliver a signal's dead deliveries again (after fixing what made them fail), and
    wait for the outcome. Exit 1 if a delivery is dead again.

    \b
    Example:
      cambium signals retry 0f8e1c... --json
    """
    from daemon.cli.client import MAX_WAIT_SECONDS, check_deliveries, daemon
    from daemon.cli.render import delivery_statuses, show

    with daemon(load(config_path), login_name()) as client:
        answer = client.retry(signal_id, wait=MAX_WAIT_SECONDS)
        if as_json:
            print_json(answer.model_dump(mode="json", exclude_none=True))
        else:
            click.echo(f"retried signal {signal_id}")
            show(delivery_statuses(answer.deliveries or {}))
        check_deliveries(client, answer.id, answer.deliveries)


@signals.command()
@click.argument("signal_id", metavar="ID", required=False)
@click.option("--receptor", metavar="NAME", help="Only the deliveries to this receptor.")
@click.option("--all", "every", is_flag=True, help="Every dead delivery of --receptor.")
@json_option
@config_option
def discard(
    signal_id: str | None,
    receptor: str | None,
    every: bool,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """Give up for good on dead deliveries that no retry can save (a payload that can never
    be applied): a signal's, or with --receptor NAME --all every one of a receptor's. They
    stop counting as dead; `signals show` says who discarded them and when. The discard is
    a signal of its own, so the log keeps it. Exit 1 if there is nothing dead to discard.

    \b
    Examples:
      cambium signals discard 0f8e1c...
      cambium signals discard --receptor consolidation --all
    """
    from daemon.cli.client import daemon

    if (signal_id is None) == (not every) or (every and receptor is None):
        raise BadInput("give a signal ID, or --receptor NAME --all")
    with daemon(load(config_path), login_name()) as client:
        answer = client.discard(signal_id, receptor=receptor, every=every)
    if as_json:
        print_json(answer.model_dump(mode="json"))
        return
    which = f"signal {signal_id}" if signal_id else f"receptor {receptor}"
    state = "" if answer.applied else " (stored, not applied yet)"
    click.echo(f"discarded the dead deliveries of {which}{state}: signal {answer.signal_id}")
