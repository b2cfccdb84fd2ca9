"""A store that cannot be opened or migrated, told in one line: which store (its URL with
the password masked), where it is, and why, without SQLAlchemy's wrapping or a traceback."""

from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError


def _masked_url(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(an unreadable URL)"


def describe_failure(url: str, exc: BaseException) -> str:
    """``the store <url> (host H, port P): <cause>``; the cause is the driver's own first
    line (``Connection refused``, ``database or disk is full``)."""
    where = ""
    try:
        parsed = make_url(url)
    except ArgumentError:
        parsed = None
    if parsed is not None and parsed.host:
        where = f" (host {parsed.host}, port {parsed.port or 'default'})"
    cause: BaseException = exc.orig if isinstance(exc, DBAPIError) and exc.orig else exc
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    text = lines[0] if lines else type(cause).__name__
    return f"the store {_masked_url(url)}{where}: {text}"
