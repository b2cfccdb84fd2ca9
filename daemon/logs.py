"""Logging, set up once: JSON lines when stdout is not a terminal (journald, launchd, files),
readable coloured lines when it is.

Under systemd (``JOURNAL_STREAM`` names the stream a line goes to) each line starts with
its syslog priority, ``<3>`` for an error, ``<4>`` a warning, ``<6>`` info, which journald
takes off and stores as the line's priority (the unit sets ``SyslogLevelPrefix=yes``), so
``journalctl -p warning`` finds the failures.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, TextIO

import structlog

LEVELS = ("debug", "info", "warning", "error")
# Syslog priorities by structlog's method name and by the standard library's level.
PRIORITIES = {"debug": 7, "info": 6, "warning": 4, "error": 3, "exception": 3, "critical": 2}
LEVEL_PRIORITIES = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3}


def to_journal(stream: TextIO) -> bool:
    """Whether ``stream`` is the journal stream systemd connected (journald's own test:
    ``JOURNAL_STREAM`` is its device and inode)."""
    expected = os.environ.get("JOURNAL_STREAM")
    if not expected:
        return False
    try:
        info = os.fstat(stream.fileno())
    except (OSError, ValueError):
        return False
    return expected == f"{info.st_dev}:{info.st_ino}"


class _Prefixed:
    """A renderer whose lines start with their syslog priority."""

    def __init__(self, renderer: structlog.typing.Processor) -> None:
        self.renderer = renderer

    def __call__(self, logger: Any, method: str, event: structlog.typing.EventDict) -> str:
        line = self.renderer(logger, method, event)
        assert isinstance(line, str), "both renderers used here give text"
        return f"<{PRIORITIES.get(method, 6)}>{line}"


class _PrefixedFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        priority = LEVEL_PRIORITIES.get(record.levelno, 2 if record.levelno > logging.ERROR else 6)
        return f"<{priority}>{super().format(record)}"


def configure_logging(level: str = "info", *, json: bool | None = None) -> None:
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}")
    if json is None:
        json = not sys.stdout.isatty()
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    )
    if to_journal(sys.stdout):
        renderer = _Prefixed(renderer)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
        cache_logger_on_first_use=True,
    )
    # Libraries that use the standard logging module (uvicorn, apscheduler, alembic) go to
    # stderr at warning and above, so they never interleave with our structured stdout.
    handler = logging.StreamHandler(sys.stderr)
    if to_journal(sys.stderr):
        handler.setFormatter(_PrefixedFormatter(logging.BASIC_FORMAT))
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
