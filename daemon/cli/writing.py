"""``cambium memory mark|note|consolidate``: adding to the memory by hand. Each is a signal
sent through the daemon's ingress (stated by the person at the terminal, ``human``), so the
signal log stays the audit trail of the memory."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from daemon.cli.common import (
    BadInput,
    Failure,
    Number,
    config_option,
    day_option,
    idempotency_option,
    json_option,
    load,
    login_name,
    print_json,
    reading_store,
)
from daemon.core import signal_types

if TYPE_CHECKING:
    from daemon.client import Emitted
    from daemon.config import Config
    from daemon.files.daily import DailyLog

HUMAN = "human"


@click.command()
@click.argument("subject")
@click.argument("observation")
@click.option("--by", "observer", help="Who states it (default: your login name).")
@click.option("--intensity", type=Number(0, 1), help="Initial strength, 0..1 (default 0.7).")
@click.option("--decay-days", type=Number(0), help="Half-life in days; 0 never fades (default 14).")
@idempotency_option
@json_option
@config_option
def mark(
    subject: str,
    observation: str,
    observer: str | None,
    intensity: float | None,
    decay_days: float | None,
    idempotency_key: str | None,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """State an observation yourself.

    OBSERVATION about SUBJECT becomes a mark (or reinforces the same one), with evidence
    naming you; the mark is printed once delivered.

    \b
    Examples:
      cambium memory mark user.coffee "takes coffee black"
      cambium memory mark user.sleep.bedtime "in bed by 23:00" --decay-days 30
      cambium memory mark user.tea "green, no sugar" --json
    """
    from daemon.core.clock import utcnow
    from daemon.services.recall import mark_made_by

    observer = observer or login_name()
    payload = _stated(subject, observation, observer)
    config = load(config_path)
    answer = _send(
        config,
        signal_types.OBSERVATION,
        observer,
        payload,
        idempotency_key,
        as_json,
        intensity=intensity,
        decay_days=decay_days,
    )
    if (answer.deliveries or {}).get("observation") != "delivered":
        return  # still pending: _send said so
    with reading_store(config) as store:
        hit = store.read_sync(lambda tx: mark_made_by(tx, answer.id, utcnow()))
    if hit is None:  # cannot happen once delivered, but never print someone else's mark
        raise Failure(f"signal {answer.id} was delivered but made no mark")
    if as_json:
        print_json(hit.to_json())
        return
    from daemon.cli.render import mark_view, show

    show(mark_view(hit.to_json(explain=True)))


def _stated(subject: str, observation: str, observer: str) -> dict[str, object]:
    """The payload of an observation a person states, its subject and text checked."""
    from daemon.core.subjects import normalize_subject

    subject = normalize_subject(subject)
    observation = observation.strip()
    if not subject:
        raise BadInput("bad SUBJECT: it must be a non-empty dot path, like user.coffee")
    if not observation:
        raise BadInput("bad OBSERVATION: it must not be empty")
    return {
        "subject": subject,
        "observation": observation,
        "evidence": {"note": f"stated by {observer} via cambium memory mark"},
        "provenance": "stated",
    }


@click.command()
@click.argument("text")
@day_option("The day's file to append to (default: today in the configured time zone).")
@idempotency_option
@json_option
@config_option
def note(
    text: str,
    day: date | None,
    idempotency_key: str | None,
    as_json: bool,
    config_path: Path | None,
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
    answer = _send(config, signal_types.DAILY_NOTE, login_name(), payload, idempotency_key, as_json)
    if (answer.deliveries or {}).get("daily") == "delivered":
        from daemon.files.daily import DailyLog

        path = DailyLog(config.paths.daily).path(day)
        if as_json:
            print_json({"signal_id": answer.id, "date": day.isoformat(), "path": str(path)})
        else:
            click.echo(f"noted in {path}")


@click.command()
@day_option("The day to consolidate (default: yesterday in the configured time zone).")
@day_option(
    "Consolidate every day not consolidated yet up to and including this one, oldest first.",
    flag="--through",
    name="through",
)
@idempotency_option
@json_option
@config_option
def consolidate(
    day: date | None,
    through: date | None,
    idempotency_key: str | None,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """Consolidate a day's log now, as the nightly rhythm does.

    The day's observations become marks, its file moves to the archive, and faded marks
    wither. With --through, every live day up to that date in turn (old journals, a long
    absence), with a progress bar on a terminal.

    \b
    Examples:
      cambium memory consolidate
      cambium memory consolidate --date 2026-01-15 --json
      cambium memory consolidate --through 2026-06-30
    """
    if day and through:
        raise BadInput("--date and --through exclude each other: give one")
    config = load(config_path)
    from daemon.cli.progress import counting
    from daemon.files.daily import DailyLog

    daily = DailyLog(config.paths.daily)
    if through is None:
        days = [day or _today(config) - timedelta(days=1)]
    else:
        days = daily.unconsolidated_days(through)
        if not days and not as_json:
            click.echo(f"nothing to consolidate up to {through}")
    shown = []
    with counting("consolidating", total=len(days)) as advance:
        for each in days:
            # One key per day: a re-run with the same key repeats none of the days done.
            key = f"{idempotency_key}:{each}" if idempotency_key and through else idempotency_key
            shown.append(
                _consolidate_day(config, daily, each, key, as_json, list_all=bool(through))
            )
            advance()
    if as_json and through:
        print_json(shown)
    elif as_json and shown[0]["outcome"] != "pending":  # a pending one is shown as sent
        print_json(shown[0])


def _consolidate_day(
    config: Config,
    daily: DailyLog,
    day: date,
    idempotency_key: str | None,
    as_json: bool,
    list_all: bool,
) -> dict[str, Any]:
    """Send one day's consolidation, wait for it, say what came of it (unless ``as_json``)
    and return that as JSON would show it (``list_all``: the caller lists every day's as
    JSON, so a day still pending is not printed apart)."""
    live, archived = daily.path(day), daily.path(day, archived=True)
    was_live = live.exists()
    payload = {"date": day.isoformat()}
    answer = _send(
        config,
        signal_types.CONSOLIDATE,
        login_name(),
        payload,
        idempotency_key,
        as_json,
        quiet=as_json and list_all,
    )
    shown: dict[str, Any] = {"date": day.isoformat(), "signal_id": answer.id}
    if (answer.deliveries or {}).get("consolidation") != "delivered":
        return shown | {"outcome": "pending"}
    unread = None
    if was_live:
        outcome, said = "consolidated", f"consolidated {day}: the log is archived at {archived}"
        if config.consolidation.extractor == "mock":
            unread = _unread(config, daily, day)
    elif archived.exists():
        outcome, said = "already consolidated", f"{day} was already consolidated: {archived}"
    else:
        outcome, said = "nothing to consolidate", f"nothing to consolidate: no daily file for {day}"
    if not as_json:
        click.echo(said)
        if unread:
            click.echo(unread)
    return shown | {"outcome": outcome, "archived": str(archived) if archived.exists() else None}


def _unread(config: Config, daily: DailyLog, day: date) -> str | None:
    """Why a day of lines made no mark, with the mock extractor, rather than let ordinary
    sentences consolidate into nothing without a word (None: some did, or it was empty)."""
    lines = [line for line in daily.read(day, archived=True) or [] if line.strip()]
    if not lines:
        return None
    with reading_store(config) as store:
        cited = store.read_sync(lambda tx: tx.marks.citing(config.workspace, f"{day}.md"))
    if cited:
        return None
    return (
        f"{len(lines)} lines, none in the `OBS subject=<path> <text>` form the mock "
        "extractor reads, so no marks: configure [llm] and set [consolidation] "
        'extractor = "openai" to extract from natural text'
    )


def _today(config: Config) -> date:
    from daemon.core.clock import utcnow

    return utcnow().astimezone(config.zone).date()


def _send(
    config: Config,
    signal_type: str,
    source_id: str,
    payload: dict[str, Any],
    idempotency_key: str | None,
    as_json: bool,
    *,
    quiet: bool = False,
    **fields: Any,
) -> Emitted:
    """Emit a signal stated by the person at the terminal and wait for its deliveries: a
    dead one fails, one still pending is reported (as the signal's JSON, with ``as_json``;
    not at all when ``quiet``: the caller reports it)."""
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
    if not answer.pending or quiet:
        return answer
    if as_json:
        print_json(answer.model_dump(mode="json", exclude_none=True))
    else:
        click.echo(
            f"stored signal {answer.id}; not delivered yet — see `cambium signals show {answer.id}`"
        )
    return answer
