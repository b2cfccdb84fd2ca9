"""The daemon, as the CLI reaches it: the public client (:mod:`daemon.client`) for writes,
and :func:`ask` for reads, with the client's errors turned into exit codes and messages for
a person: 2 input the daemon refuses, 3 not reachable (nothing was sent), 4 sent but no
answer (the idempotency key is printed, so a re-run with it is safe), 1 otherwise.

A read asks with the client's wire alone (the standard library's HTTP, JSON in and out):
no httpx and no pydantic are imported, so ``cambium status`` and a recall the daemon
answers start in about the time Python takes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.cli.common import (
    BadInput,
    Failure,
    OutcomeUnknownFailure,
    Unreachable,
    config_path_given,
    show_times_in,
)
from daemon.client import Conflict, DaemonError, NotFound, NotReachable, OutcomeUnknown, Rejected
from daemon.client._wire import NoAnswer, NotSent, Wire
from daemon.config_file import ConfigError, client_settings
from daemon.core.errors import describe
from daemon.schema.waits import MAX_WAIT_SECONDS

if TYPE_CHECKING:
    from daemon.client import Client
    from daemon.config import Config

__all__ = ["MAX_WAIT_SECONDS", "ask", "check_deliveries", "daemon", "daemon_socket"]

# Seconds the daemon gets to answer a read (a recall with a summary waits for a model).
READ_SECONDS = 60.0


@contextmanager
def answered() -> Iterator[None]:
    """Any client error leaving the block becomes the matching
    :class:`~daemon.cli.common.Failure`."""
    try:
        yield
    except NotReachable as exc:
        raise Unreachable(str(exc)) from None
    except OutcomeUnknown as exc:
        raise OutcomeUnknownFailure(
            f"sent, outcome unknown: {exc}\n"
            f"re-run the same command with --idempotency-key {exc.idempotency_key} "
            "(it is stored at most once)"
        ) from None
    except Rejected as exc:
        detail = describe(exc.errors) or exc.detail
        raise BadInput(f"refused: {detail}") from None
    except (NotFound, Conflict) as exc:
        raise Failure(exc.detail) from None
    except DaemonError as exc:
        raise Failure(f"the daemon answered {exc.status}: {exc.detail}") from None


@contextmanager
def daemon(config: Config, source_id: str) -> Iterator[Client]:
    """A client for the configured socket; its errors become failures (:func:`answered`)."""
    from daemon.client import Client

    client = Client(config.ingress.socket, source_id=source_id)
    try:
        with answered():
            yield client
    finally:
        client.close()


def daemon_socket(config_path: Path | None) -> Path:
    """The socket the config names, read from the file alone (see
    :func:`daemon.config_file.client_settings`), and the command's times shown in the
    config's time zone; a bad file exits 2."""
    try:
        settings = client_settings(config_path_given(config_path))
    except ConfigError as exc:
        raise BadInput(f"bad config: {exc}") from None
    show_times_in(settings.zone)
    return settings.socket


def ask(socket: Path, path: str, params: dict[str, str] | None = None) -> Any | None:
    """The running daemon's JSON answer to ``GET path``; ``None`` when no daemon listens at
    ``socket`` (nothing was sent). An error answer exits as :func:`answered` says."""
    wire = Wire(socket, None)
    try:
        with answered():
            return wire.request("GET", path, params=params, timeout=READ_SECONDS).json()
    except NotSent:
        return None
    except NoAnswer as exc:
        raise Unreachable(f"the daemon at {socket} did not answer ({exc})") from None
    finally:
        wire.close()


def check_deliveries(client: Client, signal_id: str, deliveries: dict[str, str] | None) -> None:
    """Fail, naming each receptor's last error, if one of ``deliveries`` is dead."""
    dead = [receptor for receptor, status in (deliveries or {}).items() if status == "dead"]
    if not dead:
        return
    errors = {d.receptor: d.last_error for d in client.signal(signal_id).deliveries}
    lines = [f"delivery to {receptor} is dead: {errors.get(receptor)}" for receptor in dead]
    lines.append(f"fix the cause, then run `cambium signals retry {signal_id}`")
    raise Failure("\n".join(lines))
