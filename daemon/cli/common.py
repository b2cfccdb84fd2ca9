"""What every ``cambium`` command shares: exit codes, failures, ``--config`` and ``--json``,
opening the store for reading, and JSON output.

Heavy modules (the config's models, SQLAlchemy, Alembic, the store) are imported inside the
functions that need them, so ``cambium --help``, the reads the daemon answers and the write
commands start quickly.
"""

from __future__ import annotations

import getpass
import json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar
from zoneinfo import ZoneInfo

import click

from daemon.config_file import ConfigError

if TYPE_CHECKING:
    from daemon.config import Config
    from daemon.store import Store

# Besides 0 (ok). Click's own usage errors exit 2 as well, like BadInput.
EXIT_FAILED, EXIT_BAD_INPUT, EXIT_UNREACHABLE, EXIT_OUTCOME_UNKNOWN = 1, 2, 3, 4

F = TypeVar("F", bound=Callable[..., Any])

# Where a group that also lists (``cambium signals --config X show ID``) leaves its
# ``--config`` for its subcommands.
_CONFIG_META = "cambium.config_path"
_ZONE_META = "cambium.zone"


class Failure(click.ClickException):
    """Stop the command: print ``cambium: <message>`` on stderr and exit 1."""

    exit_code = EXIT_FAILED

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"cambium: {self.format_message()}", err=True)


class BadInput(Failure):
    exit_code = EXIT_BAD_INPUT


class Unreachable(Failure):
    exit_code = EXIT_UNREACHABLE


class Number(click.FloatRange):
    """A finite number, optionally within bounds: ``nan`` and ``inf`` are bad input (exit 2)."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class OutcomeUnknownFailure(Failure):
    """A write was sent but no answer came: it may be stored."""

    exit_code = EXIT_OUTCOME_UNKNOWN


def idempotency_option(func: F) -> F:
    return click.option(
        "--idempotency-key",
        help="Store this write at most once per key (default: a fresh key, printed if the "
        "outcome is unknown); re-run with the printed key to be safe.",
    )(func)


def config_option(func: F) -> F:
    return click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="Config file (default: $CAMBIUM_CONFIG, then the user config directory).",
    )(func)


def json_option(func: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of text."
    )(func)


def remember_config(ctx: click.Context, config_path: Path | None) -> None:
    """Let a listing group's ``--config`` serve the subcommand invoked through it."""
    if config_path is not None:
        ctx.meta[_CONFIG_META] = config_path


def config_path_given(config_path: Path | None) -> Path | None:
    """``--config`` as given to the command, or to the listing group it was invoked through."""
    if config_path is None:
        ctx = click.get_current_context(silent=True)
        config_path = ctx.meta.get(_CONFIG_META) if ctx else None
    return config_path


def load(config_path: Path | None) -> Config:
    from daemon.config import load_config

    try:
        config = load_config(config_path_given(config_path))
    except ConfigError as exc:
        raise BadInput(f"bad config: {exc}") from None
    show_times_in(config.zone)
    return config


def show_times_in(zone: ZoneInfo) -> None:
    """The zone the running command's times are shown in (see :func:`time_zone`)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[_ZONE_META] = zone


def time_zone() -> ZoneInfo:
    """The configured time zone of the command running (UTC before any config is read):
    the one a person reads every time in, as Loom shows them."""
    ctx = click.get_current_context(silent=True)
    zone = ctx.meta.get(_ZONE_META) if ctx is not None else None
    return zone if isinstance(zone, ZoneInfo) else ZoneInfo("UTC")


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def login_name() -> str:
    """Who is at the keyboard: the default observer and reviewer."""
    return getpass.getuser()


def day_option(help_text: str, flag: str = "--date", name: str = "day") -> Callable[[F], F]:
    """``--date YYYY-MM-DD`` (or ``flag``), checked to be a real calendar date (exit 2
    otherwise)."""

    def check(ctx: click.Context, param: click.Parameter, value: str | None) -> date | None:
        from daemon.core.days import InvalidDay, parse_day

        if value is None:
            return None
        try:
            return parse_day(value)
        except InvalidDay as exc:
            raise click.BadParameter(str(exc)) from None

    return click.option(flag, name, metavar="YYYY-MM-DD", callback=check, help=help_text)


def warnings_to_stderr() -> None:
    """The memory layers log files they skip (a missing substrate entry, say): on the
    command line those warnings go to stderr, never into the output or its JSON."""
    import logging
    import sys

    import structlog

    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )


def print_json(value: Any) -> None:
    """JSON on stdout; instants as ISO 8601 UTC, like the API."""

    def encode(item: Any) -> Any:
        from daemon.core.clock import iso

        if isinstance(item, datetime):
            return iso(item)
        raise TypeError(f"{type(item).__name__} is not JSON serializable")

    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=encode))


@contextmanager
def reading_store(config: Config) -> Iterator[Store]:
    """The store, opened for reading only (no writer thread, no migrations): read commands
    work whether or not the daemon runs. A missing or unmigrated database exits 1."""
    from daemon.store import Store
    from daemon.store.migrate import current_revision, head_revision

    url = config.store.url
    advice = "run `cambium db upgrade` or start the daemon"
    # Connecting would create an empty SQLite file: look first.
    missing = missing_database(config)
    if missing is not None:
        raise Failure(f"no database at {missing}: {advice}")
    with store_failures(url, "cannot read"):
        revision = current_revision(url)
        if revision != head_revision():
            raise Failure(f"the database is not migrated (revision {revision}): {advice}")
        store = Store(url)
        try:
            yield store
        finally:
            store.close()


@contextmanager
def store_failures(url: str, doing: str, also: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """A store that cannot be reached or used ends the command with one line naming the
    store, its host and the cause (exit 1; 2 when the URL itself is unusable). ``also``:
    more exceptions that mean the store failed (not the command's own work; Alembic's
    ``CommandError`` where a command migrates)."""
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from daemon.store import describe_failure

    failures: tuple[type[Exception], ...] = (SQLAlchemyError, *also)
    try:
        yield
    except ArgumentError as exc:
        raise BadInput(f"bad config: store.url: {describe_failure(url, exc)}") from None
    except failures as exc:
        raise Failure(f"{doing} {describe_failure(url, exc)}") from None


def missing_database(config: Config) -> Path | None:
    """The SQLite file the config names, if it does not exist yet (before the first start);
    else ``None``. A server database cannot be looked at without connecting."""
    from sqlalchemy.engine import make_url

    parsed = make_url(config.store.url)
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        path = Path(parsed.database).expanduser()
        if not path.exists():
            return path
    return None


@contextmanager
def files_only_store() -> Iterator[Store]:
    """A store that is never connected to, for reading the file layers alone before there
    is a database (callers leave the marks out); it creates nothing on disk."""
    from daemon.store import Store

    store = Store("sqlite://")
    try:
        yield store
    finally:
        store.close()
