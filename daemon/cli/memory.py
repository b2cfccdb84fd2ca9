"""``cambium memory``: recall, mark, note, consolidate, seeds, substrate.

Reading (recall, seeds, substrate) goes to the store and the files directly, so it works
with the daemon stopped; everything that changes memory is a signal sent through the
daemon's ingress, so the signal log stays the audit trail of the memory.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from daemon.cli.common import (
    BadInput,
    Failure,
    Number,
    config_option,
    day_option,
    files_only_store,
    idempotency_option,
    json_option,
    load,
    login_name,
    missing_database,
    print_json,
    reading_store,
    remember_config,
    warnings_to_stderr,
)
from daemon.core import signal_types

if TYPE_CHECKING:
    from daemon.client import Emitted
    from daemon.config import Config
    from daemon.services.recall import Layers
    from daemon.store import Store

HUMAN = "human"


@click.group()
def memory() -> None:
    """Recall and review what the memory knows; add to it by hand."""


def open_memory(config: Config, store: Store) -> Layers:
    """The four layers, read-only."""
    from daemon.config import ConfigError
    from daemon.services.recall import Layers

    warnings_to_stderr()
    try:
        return Layers.from_config(config, store)
    except ConfigError as exc:  # [recall] semantic without its model
        raise BadInput(f"bad config: {exc}") from None


# -- recall ------------------------------------------------------------------------------


@memory.command()
@click.argument("about", default="")
@click.option(
    "--layers", metavar="A,B", help="Comma list of substrate, marks, daily, compost (default: all)."
)
@click.option(
    "--horizon", metavar="7d", help="1d, 7d, 30d (any Nd), all, an ISO date or an ISO instant."
)
@click.option(
    "--min-strength",
    type=Number(0, 1),
    help="Weakest mark to show, 0..1 (default 0.1; 0 with --include-withered).",
)
@click.option("--limit", type=int, metavar="N", help="Most hits per layer (default 10).")
@click.option("--include-withered", is_flag=True, help="Also show marks that have faded.")
@click.option(
    "--include-history",
    is_flag=True,
    help="Also show superseded, retracted and forgotten marks, with their links.",
)
@click.option("--workspace", help="Whose marks (default: the configured workspace).")
@click.option(
    "--format",
    "output",
    type=click.Choice(["text", "json", "context"]),
    default="text",
    help="text (default), json, or context: a bounded block to paste into a prompt.",
)
@click.option(
    "--max-chars",
    type=click.IntRange(200, 100_000),
    default=4000,
    show_default=True,
    help="With --format context: the longest the block may be.",
)
@click.option(
    "--provenance",
    metavar="A,B",
    help="Only marks that were stated, observed or inferred (comma list).",
)
@click.option(
    "--summary", is_flag=True, help="A short answer citing the items (needs an [llm] model)."
)
@json_option
@config_option
def recall(
    about: str,
    layers: str | None,
    horizon: str | None,
    min_strength: float | None,
    limit: int | None,
    include_withered: bool,
    include_history: bool,
    workspace: str | None,
    output: str,
    max_chars: int,
    provenance: str | None,
    summary: bool,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """What the memory knows about ABOUT, from all four layers.

    ABOUT is a subject path (user.food) or free text (marks are found by their words
    too); left out, it means everything. Each mark shows its strength now and how it got
    there.

    \b
    Examples:
      cambium memory recall user.food
      cambium memory recall lentil
      cambium memory recall "sleep schedule" --layers marks,daily --horizon 30d
      cambium memory recall user --min-strength 0.2 --include-withered --json
      cambium memory recall user.health --include-history
      cambium memory recall user.food --format context --max-chars 2000
      cambium memory recall user.food --provenance stated,observed
      cambium memory recall "Arnold" --summary
    """
    import anyio
    from pydantic import ValidationError

    from daemon.core.clock import utcnow
    from daemon.schema.recall import RecallQuery
    from daemon.services.recall import recall as run_recall

    given = {
        "about": about,
        "layers": layers,
        "horizon": horizon,
        "min_strength": min_strength,
        "limit": limit,
        "include_withered": include_withered,
        "include_history": include_history,
        "workspace": workspace,
        "provenance": provenance,
        "summary": summary,
    }
    try:
        query = RecallQuery.model_validate({k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        raise BadInput("; ".join(_option_error(e) for e in exc.errors())) from None
    config = load(config_path)
    if missing_database(config) is None:
        with reading_store(config) as store:
            result = run_recall(query, open_memory(config, store), utcnow())
    else:
        # Before the first start there are no marks yet: the files answer on their own.
        without_marks = tuple(layer for layer in query.layers if layer != "marks")
        with files_only_store() as store:
            memory = open_memory(config, store)
            files = query.model_copy(update={"layers": without_marks})
            result = run_recall(files, memory, utcnow())
    if query.summary:
        from daemon.services.summary import with_summary

        result = anyio.run(with_summary, result, query.about, config.llm)
    if output == "context":
        from daemon.services.context import render

        click.echo(render(result.to_json(), query.about, max_chars).text)
        return
    if as_json or output == "json":
        print_json(result.to_json())
        return
    from daemon.cli.render import recall_view, show

    show(recall_view(result, query.layers))


def _option_error(error: Any) -> str:
    name = str(error["loc"][0])
    option = "ABOUT" if name == "about" else "--" + name.replace("_", "-")
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"bad {option} {error['input']!r}: {message}"


# -- writing: mark, note, consolidate ----------------------------------------------------


@memory.command()
@click.argument("subject")
@click.argument("observation")
@click.option("--by", "observer", help="Who states it (default: your login name).")
@click.option("--intensity", type=Number(0, 1), help="Initial strength, 0..1 (default 0.7).")
@click.option("--decay-days", type=Number(0), help="Half-life in days; 0 never fades (default 14).")
@idempotency_option
@config_option
def mark(
    subject: str,
    observation: str,
    observer: str | None,
    intensity: float | None,
    decay_days: float | None,
    idempotency_key: str | None,
    config_path: Path | None,
) -> None:
    """State an observation yourself.

    OBSERVATION about SUBJECT becomes a mark (or reinforces the same one), with evidence
    naming you; the mark is printed once delivered.

    \b
    Examples:
      cambium memory mark user.coffee "takes coffee black"
      cambium memory mark user.sleep.bedtime "in bed by 23:00" --decay-days 30
    """
    from daemon.core.clock import utcnow
    from daemon.core.subjects import normalize_subject
    from daemon.services.recall import mark_made_by

    subject = normalize_subject(subject)
    observation = observation.strip()
    if not subject:
        raise BadInput("bad SUBJECT: it must be a non-empty dot path, like user.coffee")
    if not observation:
        raise BadInput("bad OBSERVATION: it must not be empty")
    observer = observer or login_name()
    payload = {
        "subject": subject,
        "observation": observation,
        "evidence": {"note": f"stated by {observer} via cambium memory mark"},
        "provenance": "stated",
    }
    config = load(config_path)
    answer = _send(
        config,
        signal_types.OBSERVATION,
        observer,
        payload,
        idempotency_key,
        intensity=intensity,
        decay_days=decay_days,
    )
    if (answer.deliveries or {}).get("observation") != "delivered":
        return  # still pending: _send said so
    with reading_store(config) as store:
        hit = store.read_sync(lambda tx: mark_made_by(tx, answer.id, utcnow()))
    if hit is None:  # cannot happen once delivered, but never print someone else's mark
        raise Failure(f"signal {answer.id} was delivered but made no mark")
    from daemon.cli.render import mark_view, show

    show(mark_view(hit))


@memory.command()
@click.argument("text")
@day_option("The day's file to append to (default: today in the configured time zone).")
@idempotency_option
@config_option
def note(
    text: str, day: date | None, idempotency_key: str | None, config_path: Path | None
) -> None:
    """Append a line to a day's log.

    TEXT (one line) goes to the day's daily file, which is consolidated into marks the
    night after.

    \b
    Examples:
      cambium memory note "slept badly; too much coffee after 16:00"
      cambium memory note "OBS subject=user.food.breakfast porridge" --date 2026-01-15
    """
    if not text.strip() or "\n" in text or "\r" in text:
        raise BadInput("bad TEXT: a daily note is one non-empty line")
    config = load(config_path)
    day = day or _today(config)
    payload = {"text": text, "date": day.isoformat()}
    answer = _send(config, signal_types.DAILY_NOTE, login_name(), payload, idempotency_key)
    if (answer.deliveries or {}).get("daily") == "delivered":
        from daemon.files.daily import DailyLog

        click.echo(f"noted in {DailyLog(config.paths.daily).path(day)}")


@memory.command()
@day_option("The day to consolidate (default: yesterday in the configured time zone).")
@idempotency_option
@config_option
def consolidate(day: date | None, idempotency_key: str | None, config_path: Path | None) -> None:
    """Consolidate a day's log now, as the nightly rhythm does.

    The day's observations become marks, its file moves to the archive, and faded marks
    wither.

    \b
    Examples:
      cambium memory consolidate
      cambium memory consolidate --date 2026-01-15
    """
    config = load(config_path)
    day = day or _today(config) - timedelta(days=1)
    from daemon.files.daily import DailyLog

    daily = DailyLog(config.paths.daily)
    live, archived = daily.path(day), daily.path(day, archived=True)
    was_live = live.exists()
    payload = {"date": day.isoformat()}
    answer = _send(config, signal_types.CONSOLIDATE, login_name(), payload, idempotency_key)
    if (answer.deliveries or {}).get("consolidation") != "delivered":
        return
    if was_live:
        click.echo(f"consolidated {day.isoformat()}: the log is archived at {archived}")
    elif archived.exists():
        click.echo(f"{day.isoformat()} was already consolidated: {archived}")
    else:
        click.echo(f"nothing to consolidate: no daily file for {day.isoformat()}")


def _today(config: Config) -> date:
    from daemon.core.clock import utcnow

    return utcnow().astimezone(config.zone).date()


def _send(
    config: Config,
    signal_type: str,
    source_id: str,
    payload: dict[str, Any],
    idempotency_key: str | None,
    **fields: Any,
) -> Emitted:
    """Emit a signal stated by the person at the terminal and wait for its deliveries: a
    dead one fails, one still pending is reported."""
    from daemon.cli.client import MAX_WAIT_SECONDS, check_deliveries, daemon

    with daemon(config, source_id) as client:
        answer = client.emit(
            signal_type,
            payload,
            source_layer=HUMAN,
            idempotency_key=idempotency_key,
            wait=MAX_WAIT_SECONDS,
            **fields,
        )
        check_deliveries(client, answer.id, answer.deliveries)
    if answer.pending:
        click.echo(
            f"stored signal {answer.id}; not delivered yet — see `cambium signals show {answer.id}`"
        )
    return answer


# -- seeds -------------------------------------------------------------------------------


@memory.group(invoke_without_command=True)
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
    @config_option
    def review(
        seed_id: str, reviewer: str | None, idempotency_key: str | None, config_path: Path | None
    ) -> None:
        from daemon.cli.client import daemon

        reviewer = reviewer or login_name()
        with daemon(load(config_path), reviewer) as client:
            seed = client.review_seed(seed_id, decision, reviewer, idempotency_key=idempotency_key)
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
      cambium memory seeds {verb} sd_0123456789abcdef01234567 --reviewer ada
    """
    return click.command(verb)(review)


seeds.add_command(_review("accepted"))
seeds.add_command(_review("rejected"))


@seeds.command()
@click.argument("seed_id", metavar="ID")
@click.option("--reviewer", help="Who undoes it (default: your login name).")
@idempotency_option
@config_option
def undo(
    seed_id: str, reviewer: str | None, idempotency_key: str | None, config_path: Path | None
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
    if "signal_id" not in seed:
        click.echo(seed.get("detail", "stored; not applied yet"))
        return
    click.echo(f"seed {seed_id} is {seed['state']} again")


# -- substrate ---------------------------------------------------------------------------


@memory.command()
@json_option
@config_option
def substrate(as_json: bool, config_path: Path | None) -> None:
    """Your own long-term files, with their contents.

    The configured entries with absolute paths, then each file's contents. The daemon
    only reads them.

    \b
    Examples:
      cambium memory substrate
      cambium memory substrate --json
    """
    from daemon.files.substrate import Substrate

    config = load(config_path)
    warnings_to_stderr()
    contents = Substrate(config.paths.substrate).contents()
    entries = [
        {
            "path": str(entry),
            "kind": "directory" if entry.is_dir() else "file" if entry.is_file() else "missing",
            "files": [str(p) for p in contents if p == entry or p.parent == entry],
        }
        for entry in config.paths.substrate
    ]
    if as_json:
        files = [{"path": str(path), "content": text} for path, text in contents.items()]
        print_json({"entries": entries, "files": files})
        return
    from daemon.cli.render import show, substrate_view

    show(substrate_view(entries, contents))
