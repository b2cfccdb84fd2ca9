"""``cambium memory seeds``: list seeds (read from the store, so it works with the daemon
stopped), accept or reject one, undo a review (through the daemon's ingress, so the signal
log stays the audit trail)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import click

from daemon.cli.common import (
    config_option,
    idempotency_option,
    json_option,
    load,
    login_name,
    print_json,
    reading_store,
    remember_config,
)


@click.group(invoke_without_command=True)
@click.option(
    "--state",
    type=click.Choice(["pending", "accepted", "rejected", "withered"]),
    help="Only seeds in this state.",
)
@json_option
@config_option
@click.pass_context
def seeds(ctx: click.Context, state: str | None, as_json: bool, config_path: Path | None) -> None:
    """List, accept and reject seeds.

    Seeds are proposed additions to your files, listed newest first. Accepting one
    promotes the marks it is based on; the file itself is yours to edit: the daemon never
    writes it.

    \b
    Examples:
      cambium memory seeds --state pending
      cambium memory seeds --json
      cambium memory seeds accept sd_0123456789abcdef01234567
      cambium memory seeds reject sd_0123456789abcdef01234567 --reviewer ada
    """
    remember_config(ctx, config_path)
    if ctx.invoked_subcommand is not None:
        return
    config = load(config_path)
    with reading_store(config) as store:
        found = store.read_sync(lambda tx: tx.seeds.listing(config.workspace, state))
    if as_json:
        print_json([seed.to_row() for seed in found])
        return
    from daemon.cli.render import seeds_view, show

    show(seeds_view(found))


def _review(decision: Literal["accepted", "rejected"]) -> click.Command:
    verb = decision.removesuffix("ed")

    @click.argument("seed_id", metavar="ID")
    @click.option("--reviewer", help="Who decides (default: your login name).")
    @idempotency_option
    @json_option
    @config_option
    def review(
        seed_id: str,
        reviewer: str | None,
        idempotency_key: str | None,
        as_json: bool,
        config_path: Path | None,
    ) -> None:
        from daemon.cli.client import daemon

        reviewer = reviewer or login_name()
        with daemon(load(config_path), reviewer) as client:
            seed = client.review_seed(seed_id, decision, reviewer, idempotency_key=idempotency_key)
        if as_json:
            print_json(seed.model_dump(mode="json"))
            return
        if seed.state == "pending":
            click.echo(
                f"review of seed {seed_id} stored as signal {seed.signal_id}; not applied yet"
            )
            return
        click.echo(f"seed {seed_id} {seed.state} by {seed.reviewed_by}")
        if seed.state == "accepted":
            if seed.based_on_marks:
                click.echo(f"promoted {', '.join(seed.based_on_marks)}")
            click.echo(f"the daemon never edits {seed.target_file}: make the change yourself")

    review.__doc__ = f"""{verb.capitalize()} the pending seed ID.

    \b
    Example:
      cambium memory seeds {verb} sd_0123456789abcdef01234567 --reviewer ada --json
    """
    return click.command(verb)(review)


seeds.add_command(_review("accepted"))
seeds.add_command(_review("rejected"))


@seeds.command()
@click.argument("seed_id", metavar="ID")
@click.option("--reviewer", help="Who undoes it (default: your login name).")
@idempotency_option
@json_option
@config_option
def undo(
    seed_id: str,
    reviewer: str | None,
    idempotency_key: str | None,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """Undo the review of seed ID: it is pending again (within seeds.undo_hours).

    \b
    Example:
      cambium memory seeds undo sd_0123456789abcdef01234567
    """
    from daemon.cli.client import daemon

    reviewer = reviewer or login_name()
    with daemon(load(config_path), reviewer) as client:
        seed = client.undo_review(seed_id, reviewer, idempotency_key=idempotency_key)
    if as_json:
        print_json(seed)
        return
    if "signal_id" not in seed:
        click.echo(seed.get("detail", "stored; not applied yet"))
        return
    click.echo(f"seed {seed_id} is {seed['state']} again")
