"""``cambium memory correct|retract|forget|tombstones``: govern what the memory keeps.

Each change goes through the daemon as a signal (so the log is the audit trail); the list
of tombstones is read from the store directly."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from daemon.cli.common import (
    BadInput,
    config_option,
    idempotency_option,
    json_option,
    load,
    login_name,
    plural,
    print_json,
    reading_store,
)

# What `forget` takes for a mark id rather than a subject (ids are derived: mk_ + 24 hex).
_MARK_ID = re.compile(r"^mk_[0-9a-f]{24}$")

reason_option = click.option(
    "--reason", required=True, help="Why (kept in the history, and in the tombstone)."
)
by_option = click.option("--by", "who", help="Who asks (default: your login name).")


def _ask(config_path: Path | None, who: str | None, ask: Callable[[Any], Any]) -> Any:
    """``ask(client)`` against the daemon, as ``who`` (default: your login name)."""
    from daemon.cli.client import daemon

    with daemon(load(config_path), who or login_name()) as client:
        return ask(client)


def _nonempty(name: str, value: str) -> str:
    if not value.strip():
        raise BadInput(f"bad {name}: it must not be empty")
    return value.strip()


def _applied(answer: dict[str, Any]) -> bool:
    if "signal_id" in answer:
        return True
    click.echo(answer.get("detail", "stored; not applied yet"))
    return False


@click.command()
@click.argument("mark_id", metavar="MARK-ID")
@click.argument("text", metavar="NEW-TEXT")
@reason_option
@by_option
@idempotency_option
@json_option
@config_option
def correct(
    mark_id: str,
    text: str,
    reason: str,
    who: str | None,
    idempotency_key: str | None,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """Correct a mark: a new mark saying NEW-TEXT supersedes MARK-ID.

    Both stay linked (recall --include-history shows the chain); recall shows only the
    newest.

    \b
    Example:
      cambium memory correct mk_0123456789abcdef01234567 "in bed by 22:30" \\
        --reason "moved bedtime earlier"
    """
    text, reason = _nonempty("NEW-TEXT", text), _nonempty("--reason", reason)
    answer = _ask(
        config_path,
        who,
        lambda c: c.correct(mark_id, text, reason=reason, idempotency_key=idempotency_key),
    )
    if as_json:
        print_json(answer)
    elif _applied(answer):
        new = answer["mark"]
        click.echo(
            f"{mark_id} is superseded by {new['id']}: {new['subject']} — {new['observation']}"
        )


@click.command()
@click.argument("mark_id", metavar="MARK-ID")
@reason_option
@by_option
@idempotency_option
@json_option
@config_option
def retract(
    mark_id: str,
    reason: str,
    who: str | None,
    idempotency_key: str | None,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """Retract a mark: it no longer stands, and recall stops showing it (its text stays in
    the history; use `forget` to erase it).

    \b
    Example:
      cambium memory retract mk_0123456789abcdef01234567 --reason "was a joke"
    """
    reason = _nonempty("--reason", reason)
    answer = _ask(
        config_path,
        who,
        lambda c: c.retract(mark_id, reason=reason, idempotency_key=idempotency_key),
    )
    if as_json:
        print_json(answer)
    elif _applied(answer):
        click.echo(f"{mark_id} is retracted: {reason}")


@click.command()
@click.argument("target", metavar="SUBJECT|MARK-ID")
@reason_option
@by_option
@idempotency_option
@json_option
@config_option
def forget(
    target: str,
    reason: str,
    who: str | None,
    idempotency_key: str | None,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """Forget a subject (and everything under it) or one mark (and its corrections).

    Every copy the daemon holds is erased: the marks' text, the signal payloads, seeds,
    saved model answers and embeddings that carried it, and the archived daily lines the
    marks cite (replaced by a marker). A tombstone keeps who, when, why and how many, never
    the text. Your live daily files are yours: the lines that still mention it are listed
    for you to edit. A forget that matches nothing is refused (exit 1).

    \b
    Examples:
      cambium memory forget user.health --reason "private"
      cambium memory forget mk_0123456789abcdef01234567 --reason "wrong person"
    """
    reason = _nonempty("--reason", reason)
    target = _nonempty("SUBJECT|MARK-ID", target)
    named = {"mark_id": target} if _MARK_ID.match(target) else {"subject": target}
    answer = _ask(
        config_path,
        who,
        lambda c: c.forget(reason=reason, idempotency_key=idempotency_key, **named),
    )
    if as_json:
        print_json(answer)
    elif _applied(answer):
        t = answer["tombstone"]
        click.echo(
            f"forgot {t['target']}: {plural(t['marks_erased'], 'mark')} and "
            f"{plural(t['signals_erased'], 'signal payload')} erased (tombstone {t['id']})"
        )
        live = answer.get("live_lines", [])
        if live:
            click.echo("still in your daily files (edit them yourself):")
        for line in live:
            click.echo(f"  {line['path']}:{line['line']}")


@click.command()
@json_option
@config_option
def tombstones(as_json: bool, config_path: Path | None) -> None:
    """What was forgotten: who, when, why and how many, newest first.

    \b
    Example:
      cambium memory tombstones --json
    """
    from daemon.core.clock import iso

    config = load(config_path)
    with reading_store(config) as store:
        found = store.read_sync(lambda tx: tx.tombstones.listing(config.workspace))
    if as_json:
        print_json([t.to_row() for t in found])
        return
    if not found:
        click.echo("nothing has been forgotten")
    for t in found:
        click.echo(
            f"{iso(t.forgotten_at)}  {t.target_kind} {t.target}  by {t.forgotten_by}: "
            f"{t.reason} ({plural(t.marks_erased, 'mark')}, {plural(t.signals_erased, 'signal')})"
        )
