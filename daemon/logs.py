"""Logging, set up once: JSON lines when stdout is not a terminal (journald, launchd, files),
readable coloured lines when it is."""

from __future__ import annotations

import logging
import sys

import structlog

LEVELS = ("debug", "info", "warning", "error")


def configure_logging(level: str = "info", *, json: bool | None = None) -> None:
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}")
    if json is None:
        json = not sys.stdout.isatty()
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    )
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
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, force=True)
