"""``cambium export PATH`` and ``cambium import PATH``: carry the memory out, and back in.

Both work on the store directly (like ``cambium db upgrade``), daemon running or not."""

from __future__ import annotations

from pathlib import Path

import click

from daemon.cli.common import (
    BadInput,
    Failure,
    config_option,
    json_option,
    load,
    plural,
    print_json,
)


@click.command()
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--force", is_flag=True, help="Replace PATH if it exists.")
@json_option
@config_option
def export(path: Path, force: bool, as_json: bool, config_path: Path | None) -> None:
    """Write the whole memory to one archive file at PATH.

    Marks, reinforcements, seeds, tombstones, the signal log and the daily files, archived
    and live (today's log too), with a manifest of SHA-256 hashes (a versioned tar file).

    \b
    Example:
      cambium export ~/cambium-2026-12-01.tar
    """
    from daemon.cli.common import reading_store
    from daemon.cli.progress import working
    from daemon.core.clock import utcnow
    from daemon.services.archive import export_archive

    if path.exists() and not force:
        raise BadInput(f"bad PATH: {path} exists (add --force to replace it)")
    config = load(config_path)
    with reading_store(config) as store, working(f"exporting to {path}"):
        manifest = export_archive(store, config.paths.daily, path, utcnow())
    if as_json:
        print_json(manifest.to_json() | {"path": str(path)})
        return
    click.echo(f"exported {len(manifest.entries)} entries to {path}")
    click.echo(f"content hash {manifest.content_hash}")


@click.command("import")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False))
@json_option
@config_option
def import_archive(path: Path, as_json: bool, config_path: Path | None) -> None:
    """Add an archive written by `cambium export` to this memory.

    Every hash is checked before anything is written; a damaged or altered archive is
    refused naming the entry (exit 1). Importing the same archive twice changes nothing.
    Existing daily files are never replaced: an archived one that differs is kept and
    reported; a live one with other lines than the archive's refuses the import (exit 1,
    nothing written) until it is moved aside.

    \b
    Example:
      cambium import ~/cambium-2026-12-01.tar
    """
    from daemon.cli.common import missing_database, reading_store, store_failures
    from daemon.cli.progress import working
    from daemon.services.archive import ArchiveChanged, ArchiveRefused
    from daemon.services.archive import import_archive as run_import
    from daemon.store.migrate import upgrade

    if not path.is_file():
        raise BadInput(f"bad PATH: {path} is not a file")
    config = load(config_path)
    if missing_database(config) is not None:  # a new home (restoring onto a new machine)
        from alembic.util import CommandError

        with store_failures(config.store.url, "cannot create", also=(OSError, CommandError)):
            upgrade(config.store.url)
    with reading_store(config) as store, working(f"importing {path}"):
        try:
            result = run_import(store, config.paths.daily, path)
        except ArchiveChanged as exc:
            raise Failure(f"stopped: {exc}") from None
        except ArchiveRefused as exc:
            raise Failure(f"refused, nothing was imported: {exc}") from None
    if as_json:
        print_json(result.__dict__)
        return
    click.echo(
        f"imported {plural(result.signals, 'signal')}, {plural(result.marks, 'mark')}, "
        f"{plural(result.daily_files, 'daily archive file')}, "
        f"{plural(result.live_files, 'live daily file')}"
    )
    for conflict in result.daily_conflicts:
        click.echo(f"kept your {conflict}: it differs from the archive's", err=True)
    if result.daily_files or result.live_files:
        click.echo(
            "recall finds their lines once the daemon has indexed them (a running one "
            "starts at the next recall, a stopped one at its start), or now: `cambium "
            "index rebuild`"
        )
