"""Progress for long jobs: on a terminal, a ``rich.progress`` line on stderr (so stdout,
and its ``--json``, stay clean) that is cleared when the job ends; piped, nothing.

The jobs report no counts along the way yet (an export or an import is one call into
:mod:`daemon.services.archive`), so the line is a spinner with the job's name and the time
it has taken."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


def on_a_terminal() -> bool:
    return sys.stderr.isatty()


@contextmanager
def working(description: str) -> Iterator[None]:
    """Show ``description`` as in progress while the block runs (on a terminal only)."""
    if not on_a_terminal():
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True, markup=False, emoji=False, highlight=False)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        progress.add_task(description, total=None)
        progress.refresh()  # drawn at once, not at the first tick: a short job is seen too
        yield
