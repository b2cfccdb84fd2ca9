"""The daemon, as the write commands (and ``status``) reach it: the public client
(:mod:`daemon.client`), its errors turned into exit codes and messages for a person:
2 input the daemon refuses, 3 not reachable (nothing was sent), 4 sent but no answer (the
idempotency key is printed, so a re-run with it is safe), 1 otherwise."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from daemon.cli.common import BadInput, Failure, OutcomeUnknownFailure, Unreachable
from daemon.client import (
    Client,
    Conflict,
    DaemonError,
    NotFound,
    NotReachable,
    OutcomeUnknown,
    Rejected,
)
from daemon.config import Config
from daemon.core.errors import describe
from daemon.schema.waits import MAX_WAIT_SECONDS

__all__ = ["MAX_WAIT_SECONDS", "check_deliveries", "daemon"]


@contextmanager
def daemon(config: Config, source_id: str) -> Iterator[Client]:
    """A client for the configured socket; any client error leaving the block becomes the
    matching :class:`~daemon.cli.common.Failure`."""
    client = Client(config.ingress.socket, source_id=source_id)
    try:
        yield client
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
    finally:
        client.close()


def check_deliveries(client: Client, signal_id: str, deliveries: dict[str, str] | None) -> None:
    """Fail, naming each receptor's last error, if one of ``deliveries`` is dead."""
    dead = [receptor for receptor, status in (deliveries or {}).items() if status == "dead"]
    if not dead:
        return
    errors = {d.receptor: d.last_error for d in client.signal(signal_id).deliveries}
    lines = [f"delivery to {receptor} is dead: {errors.get(receptor)}" for receptor in dead]
    lines.append(f"fix the cause, then run `cambium signals retry {signal_id}`")
    raise Failure("\n".join(lines))
