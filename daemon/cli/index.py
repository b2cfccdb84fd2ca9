"""``cambium index check`` and ``cambium index rebuild``: the store's text index (daily
lines, marks, substrate files and compost learnings), seen and brought up to date by a
person.

The daemon keeps the index current by itself (and builds what is missing when it starts);
these commands are for looking at it, and for building it ahead of a start (after an
upgrade, or a restore). Both work on the store directly, daemon running or not: the
index's rows are written file by file and mark chunk by mark chunk, so an interrupted
rebuild resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from daemon.cli.common import Failure, config_option, json_option, load, print_json

if TYPE_CHECKING:
    from daemon.config import Config
    from daemon.services.recall import Memory
    from daemon.store import Store


@click.group()
def index() -> None:
    """The text index recall ranks from (every layer's texts, in the store)."""


@index.command()
@json_option
@config_option
def check(as_json: bool, config_path: Path | None) -> None:
    """Report what the index lacks or holds stale; exit 1 if anything.

    Daily, substrate and compost files whose size or mtime changed are read and hashed (an
    unchanged file is not read); marks are counted: queued for indexing, or missing from
    the index.

    \b
    Example:
      cambium index check
    """
    from daemon.cli.common import reading_store

    config = load(config_path)
    with reading_store(config) as store:
        report = _status(config, store)
    if as_json:
        print_json(asdict(report))
    else:
        for line in report.daily:
            click.echo(f"daily {line['day']} ({line['file']}): {line['why']}")
        for layer, stale in (("substrate", report.substrate), ("compost", report.compost)):
            for file in stale:
                click.echo(f"{layer} {file['path']}: {file['why']}")
        click.echo(f"marks queued for indexing: {report.marks_queued}")
        click.echo(f"marks missing from the index: {report.marks_missing}")
    if not report.current:
        raise SystemExit(1)
    if not as_json:
        click.echo("the index is up to date")


@index.command()
@json_option
@config_option
def rebuild(as_json: bool, config_path: Path | None) -> None:
    """Build what the index lacks and re-read what is stale, printing progress.

    Safe to interrupt and run again: what was written stays, and only the rest is done.

    \b
    Example:
      cambium index rebuild
      cambium index rebuild --json
    """
    from daemon.cli.common import reading_store

    config = load(config_path)
    with reading_store(config) as store:
        store.start()  # the index is written through the store's own connections
        memory = _layers(config, store)
        queued = store.write_sync(lambda tx: tx.text_index.queue_unindexed_marks())
        if queued:
            click.echo(f"marks: {queued} missing from the index, queued", err=True)
        memory.daily.refresh(_progress("daily files"))
        memory.substrate.refresh(_progress("substrate files"))
        memory.compost.refresh(_progress("compost files"))
        done = memory.mark_search.index(store)
        click.echo(f"marks: {done} indexed", err=True)
        report = _status(config, store)
    if not report.current:
        raise Failure("the index is still not up to date (was it changed meanwhile?)")
    if as_json:
        print_json({"current": True, "marks_queued": queued, "marks_indexed": done})
        return
    click.echo("the index is up to date")


def _layers(config: Config, store: Store) -> Memory:
    from daemon.cli.memory import open_memory

    return open_memory(config, store)


@dataclass(frozen=True)
class IndexStatus:
    daily: list[dict[str, str]]  # the stale files: day, file (live|claimed|archived), why
    marks_queued: int
    marks_missing: int
    substrate: list[dict[str, str]]  # the stale files: path, why
    compost: list[dict[str, str]]

    @property
    def current(self) -> bool:
        stale = self.daily or self.substrate or self.compost
        return not (stale or self.marks_queued or self.marks_missing)


def _status(config: Config, store: Store) -> IndexStatus:
    memory = _layers(config, store)
    stale = [
        {"day": day.isoformat(), "file": state, "why": why}
        for day, state, why in memory.daily.stale()
    ]
    queued, missing = store.read_sync(
        lambda tx: (tx.text_index.count_pending(), tx.text_index.count_unindexed_marks())
    )
    return IndexStatus(
        stale,
        queued,
        missing,
        [{"path": path, "why": why} for path, why in memory.substrate.stale()],
        [{"path": path, "why": why} for path, why in memory.compost.stale()],
    )


def _progress(what: str) -> Callable[[int, int], None]:
    """Tells stderr how far a pass has come, about every twentieth of the way."""

    def show(done: int, total: int) -> None:
        if done == total or done % max(total // 20, 1) == 0:
            click.echo(f"{what}: {done}/{total}", err=True)

    return show
