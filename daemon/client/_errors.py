"""What can go wrong talking to the daemon, as types a caller can act on.

- :class:`NotReachable`: nothing was sent (no socket, nobody listening), or a read got no
  answer. Start the daemon and try again.
- :class:`OutcomeUnknown`: a write was sent but no answer came back; it may or may not be
  stored. Send it again with the same ``idempotency_key``: the daemon stores it at most once.
- :class:`DaemonError` and its kinds: the daemon answered with an error (nothing stored).
"""

from __future__ import annotations

from daemon.core.errors import FieldError


class CambiumError(Exception):
    """Every error the client raises."""


class NotReachable(CambiumError):
    """The daemon could not be reached; nothing was stored."""


class OutcomeUnknown(CambiumError):
    """A write was sent and no answer came: it may have been stored. Retrying with
    ``idempotency_key`` is safe."""

    def __init__(self, message: str, idempotency_key: str) -> None:
        super().__init__(message)
        self.idempotency_key = idempotency_key


class DaemonError(CambiumError):
    """The daemon answered ``status`` with an error; ``detail`` says why."""

    def __init__(self, status: int, detail: str, errors: list[FieldError] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors or []


class Rejected(DaemonError):
    """Bad input (422) or too large (413); ``errors`` names each field and its rule."""


class NotFound(DaemonError):
    """404: no such signal or seed."""


class Conflict(DaemonError):
    """409: the request contradicts the current state (a seed already reviewed, say)."""


class Unavailable(DaemonError):
    """503: the daemon is stopping or its store cannot take writes; nothing was stored."""


def error_for(status: int, detail: str, errors: list[FieldError]) -> DaemonError:
    kind: type[DaemonError] = {
        413: Rejected,
        422: Rejected,
        404: NotFound,
        409: Conflict,
        503: Unavailable,
    }.get(status, DaemonError)
    return kind(status, detail, errors)
