"""Progress for long jobs: on a terminal, a ``rich.progress`` line on stderr (so stdout,
and its ``--json``, stay clean) that is cleared when the job ends; piped, nothing.

A job that reports no counts along the way (an export or an import is one call into
:mod:`daemon.services.archive`) shows a spinner with its name and the time it has taken
(:func:`working`); a job of counted steps, a bar (:func:`counting`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def on_a_terminal() -> bool:
    return sys.stderr.isatty()


@contextmanager
def working(description: str) -> Iterator[None]:
    """Show ``description`` as in progress while the block runs (on a terminal only)."""
    with _progress(description, total=None, bar=False):
        yield


@contextmanager
def counting(description: str, total: int) -> Iterator[Callable[[], None]]:
    """A bar for ``total`` steps while the block runs (on a terminal only); the block calls
    what it is given once per step done."""
    with _progress(description, total=total, bar=True) as advance:
        yield advance


@contextmanager
def _progress(description: str, total: int | None, bar: bool) -> Iterator[Callable[[], None]]:
    if not on_a_terminal():
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(stderr=True, markup=False, emoji=False, highlight=False)
    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if bar:
        columns += [BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as progress:
        task = progress.add_task(description, total=total)
        progress.refresh()  # drawn at once, not at the first tick: a short job is seen too
        yield lambda: progress.advance(task)
