"""``cambium export`` / ``cambium import``: the memory as one versioned archive.

The archive is an uncompressed tar file (so a damaged byte stays inside the entry it hit,
and the entry can be named). ``manifest.json`` comes first: the format name and version,
and for every other entry its SHA-256 and size, plus ``content_hash`` over all of them. The
entries: ``marks.jsonl``, ``reinforcements.jsonl``, ``seeds.jsonl``, ``tombstones.jsonl``,
``signals.jsonl`` (one row per line, keys sorted, instants ISO 8601 UTC, rows by id; the
signal log in log order), ``daily/archive/YYYY-MM-DD.md`` (the daily archive files, as
they are) and, since version 2, ``daily/live/YYYY-MM-DD.md`` (the live daily files, as they
are: today's log, and any day not consolidated yet). The same memory always exports to the
same entries, whatever the store, so two exports can be compared by ``content_hash``.
Version 1 archives (without live files) are still read.

Neither side holds the memory whole (three years of notes and signals held 1.4 GB to
export and 2.4 GB to import): export writes each entry to a spool beside the archive,
hashing it as it goes, and then the archive from it; import reads the archive twice. The
spool and the archive being written have no name in the directory (Linux's ``O_TMPFILE``),
so an export killed halfway leaves no copy of the memory there.
Import first checks the format version and every hash before writing anything; then it
inserts, in one transaction, a batch of rows at a time, every row whose id is not stored yet
(signals come without deliveries: they are history, not work to do), and writes each daily
archive file that does not exist yet. A live daily file is written where none is; where the
day already holds its lines (imported before, and perhaps consolidated or written on since)
nothing is written; a live file of that day with other lines refuses the whole import before
anything is written, naming the file (the person's own log is never replaced or merged by
guesswork). A second import of the same archive changes nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import IO, Any

from daemon.core.clock import iso, utcnow
from daemon.core.days import InvalidDay, parse_day
from daemon.fs import whole_file
from daemon.store import DeliveriesPending, Store, Tx

FORMAT = "cambium-memory-export"
VERSION = 2
READABLE_VERSIONS = (1, 2)
MANIFEST = "manifest.json"
TABLES = ("signals", "marks", "reinforcements", "seeds", "tombstones")
DAILY_PREFIX = "daily/archive/"
LIVE_PREFIX = "daily/live/"  # since version 2
BATCH = 5_000  # rows an import inserts at a time


class ArchiveRefused(ValueError):
    """The archive cannot be imported; nothing was written. ``entry`` names the entry at
    fault, when one is."""

    def __init__(self, message: str, entry: str | None = None) -> None:
        super().__init__(f"{entry}: {message}" if entry else message)
        self.entry = entry


class ArchiveChanged(ArchiveRefused):
    """An entry read again to be imported is not what was checked (the file was written
    over meanwhile): the import stopped there. Its rows were rolled back; daily files
    written before it stay (importing again once the archive is whole adds the rest)."""


@dataclass(frozen=True)
class Manifest:
    entries: dict[str, dict[str, Any]]  # name -> {"sha256", "bytes"}
    content_hash: str
    exported_at: str
    version: int = VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": self.version,
            "exported_at": self.exported_at,
            "content_hash": self.content_hash,
            "entries": self.entries,
        }


@dataclass
class Imported:
    """What an import added (all zero for an archive imported before)."""

    signals: int = 0
    marks: int = 0
    daily_files: int = 0
    live_files: int = 0
    daily_conflicts: list[str] = field(default_factory=list)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_hash(entries: dict[str, dict[str, Any]]) -> str:
    """One hash for all entries (names and contents), independent of when they were written."""
    lines = "".join(f"{name}\t{entries[name]['sha256']}\n" for name in sorted(entries))
    return _sha256(lines.encode())


def _json_line(row: dict[str, Any]) -> bytes:
    def encode(value: Any) -> Any:
        if isinstance(value, datetime):
            return iso(value)
        raise TypeError(f"{type(value).__name__} cannot be exported")

    return json.dumps(row, sort_keys=True, ensure_ascii=False, default=encode).encode() + b"\n"


class _Spool:
    """Entries written one after another to one file without a name (a process killed
    mid-export leaves no copy of the memory behind), each hashed as it is written, for the
    manifest that goes before them in the archive."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        self.entries: dict[str, dict[str, Any]] = {}
        self.offsets: dict[str, int] = {}

    def write(self, name: str, chunks: Iterable[bytes]) -> None:
        self.offsets[name] = self.file.tell()
        digest, size = hashlib.sha256(), 0
        for chunk in chunks:
            self.file.write(chunk)
            digest.update(chunk)
            size += len(chunk)
        self.entries[name] = {"sha256": digest.hexdigest(), "bytes": size}

    def read(self, name: str) -> IO[bytes]:
        """The spool, positioned at the entry (the archive reads its size from there)."""
        self.file.seek(self.offsets[name])
        return self.file


def _table_rows(tx: Tx) -> dict[str, Iterator[dict[str, Any]]]:
    return {
        "signals": tx.signals.all_rows(),
        "marks": tx.marks.all_rows(),
        "reinforcements": tx.marks.all_reinforcement_rows(),
        "seeds": tx.seeds.all_rows(),
        "tombstones": tx.tombstones.all_rows(),
    }


def _spool_tables(spool: _Spool, tx: Tx) -> None:
    for name, rows in _table_rows(tx).items():
        spool.write(f"{name}.jsonl", (_json_line(row) for row in rows))


def _spool_day_files(spool: _Spool, directory: Path, prefix: str) -> None:
    """The day files of a directory (regular files named after a real day; nothing else,
    so neither the claims and records hidden in the archive nor anything a symlink names),
    as entries under ``prefix``."""
    if not directory.is_dir():
        return
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if not entry.name.endswith(".md") or not entry.is_file(follow_symlinks=False):
            continue
        try:
            parse_day(entry.name.removesuffix(".md"))
        except InvalidDay:
            continue
        spool.write(prefix + entry.name, [Path(entry.path).read_bytes()])


def export_archive(store: Store, daily_dir: Path, path: Path, now: datetime) -> Manifest:
    """Write the archive to ``path`` (atomically: a crash leaves no half archive there, and
    no spool or partial archive beside it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=path.parent) as spooled, whole_file(path.parent) as whole:
        spool = _Spool(spooled)
        # One transaction: a consistent snapshot of the tables.
        store.read_sync(partial(_spool_tables, spool))
        _spool_day_files(spool, daily_dir / "archive", DAILY_PREFIX)
        _spool_day_files(spool, daily_dir, LIVE_PREFIX)
        manifest = Manifest(spool.entries, content_hash(spool.entries), iso(now))
        manifest_bytes = json.dumps(manifest.to_json(), indent=2, sort_keys=True).encode() + b"\n"
        with tarfile.open(fileobj=whole.file, mode="w", format=tarfile.PAX_FORMAT) as archive:
            _add(archive, MANIFEST, len(manifest_bytes), io.BytesIO(manifest_bytes), now)
            for name in sorted(spool.entries):
                _add(archive, name, spool.entries[name]["bytes"], spool.read(name), now)
        whole.name_as(path, replace=True)
    return manifest


def _add(archive: tarfile.TarFile, name: str, size: int, data: IO[bytes], now: datetime) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o600, int(now.timestamp())
    archive.addfile(info, data)


def read_archive(path: Path) -> Manifest:
    """The archive's manifest, once every entry was checked against it (each read a piece
    at a time, never held); raises :class:`ArchiveRefused` naming what is wrong."""
    with _opened(path) as file:
        return _checked(file, path)


@contextmanager
def _opened(path: Path) -> Iterator[IO[bytes]]:
    try:
        file = path.open("rb")
    except OSError as exc:
        raise ArchiveRefused(f"cannot read {path}: {exc.strerror or exc}") from None
    with file:
        yield file


def _checked(file: IO[bytes], path: Path) -> Manifest:
    manifest_blob: bytes | None = None
    digests: dict[str, str] = {}
    try:
        with tarfile.open(fileobj=file, mode="r:") as archive:
            for member in archive:
                if not member.isfile():
                    raise ArchiveRefused("not a regular file", member.name)
                again = member.name == MANIFEST and manifest_blob is not None
                if again or member.name in digests:
                    raise ArchiveRefused("appears twice", member.name)
                extracted = archive.extractfile(member)
                assert extracted is not None
                if member.name == MANIFEST:
                    manifest_blob = extracted.read()
                else:
                    digests[member.name] = _digest(extracted)
    except (tarfile.TarError, EOFError) as exc:
        raise ArchiveRefused(f"{path} is not a readable archive ({exc})") from None
    except OSError as exc:
        raise ArchiveRefused(f"cannot read {path}: {exc.strerror or exc}") from None
    manifest = _manifest(manifest_blob)
    for name in sorted(set(digests) | set(manifest.entries)):
        if name not in manifest.entries:
            raise ArchiveRefused("is not in the manifest", name)
        if name not in digests:
            raise ArchiveRefused("is in the manifest but missing from the archive", name)
        if digests[name] != manifest.entries[name].get("sha256"):
            raise ArchiveRefused("SHA-256 does not match the manifest (damaged or altered)", name)
        if name not in {f"{t}.jsonl" for t in TABLES}:
            _check_daily_name(name, manifest.version)
    if content_hash(manifest.entries) != manifest.content_hash:
        raise ArchiveRefused("content_hash does not match its entries", MANIFEST)
    return manifest


def _digest(data: IO[bytes]) -> str:
    digest = hashlib.sha256()
    while chunk := data.read(1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


def _manifest(blob: bytes | None) -> Manifest:
    if blob is None:
        raise ArchiveRefused("missing: this is not a cambium export", MANIFEST)
    try:
        raw = json.loads(blob)
        if raw.get("format") != FORMAT:
            raise ArchiveRefused(f"format is {raw.get('format')!r}, not {FORMAT!r}", MANIFEST)
        version = raw.get("version")
        if version not in READABLE_VERSIONS:
            readable = ", ".join(map(str, READABLE_VERSIONS))
            raise ArchiveRefused(
                f"format version {version!r} is not supported (this cambium reads "
                f"versions {readable})",
                MANIFEST,
            )
        return Manifest(
            dict(raw["entries"]), str(raw["content_hash"]), str(raw["exported_at"]), version
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, ArchiveRefused):
            raise
        raise ArchiveRefused(f"not a valid manifest ({exc})", MANIFEST) from None


def _check_daily_name(name: str, version: int) -> None:
    prefixes = (DAILY_PREFIX, LIVE_PREFIX) if version >= 2 else (DAILY_PREFIX,)
    prefix = next((p for p in prefixes if name.startswith(p)), None)
    day = name.removeprefix(prefix or "").removesuffix(".md")
    if prefix is None or not name.endswith(".md") or "/" in day:
        raise ArchiveRefused(f"is not an entry format version {version} has", name)
    try:
        parse_day(day)
    except InvalidDay as exc:
        raise ArchiveRefused(str(exc), name) from None


def _batches(name: str, data: IO[bytes], sha256: str) -> Iterator[list[dict[str, Any]]]:
    """The rows of a JSON lines entry, :data:`BATCH` at a time; the last one only once the
    entry proved to be what was checked (it is read again: the file may have changed)."""
    batch: list[dict[str, Any]] = []
    digest = hashlib.sha256()
    try:
        for raw in data:
            digest.update(raw)
            line = raw.decode()
            if not line.strip():
                continue
            row = json.loads(line)
            if not (isinstance(row, dict) and "id" in row):
                raise ArchiveRefused("every line must be an object with an id", name)
            batch.append(row)
            if len(batch) == BATCH:
                yield batch
                batch = []
    except ArchiveRefused:
        raise
    except ValueError as exc:  # (not JSON, or not UTF-8)
        raise ArchiveRefused(f"not JSON lines ({exc})", name) from None
    _unchanged(name, digest, sha256)
    if batch:
        yield batch


def _unchanged(name: str, digest: Any, sha256: str) -> None:
    if digest.hexdigest() != sha256:
        raise ArchiveChanged(
            "changed while it was imported: import it again once it is whole (nothing is "
            "imported twice)",
            name,
        )


def import_archive(store: Store, daily_dir: Path, path: Path) -> Imported:
    """Check the whole archive, then add what is not there yet. Raises
    :class:`ArchiveRefused` (nothing written) for an archive that fails any check, or whose
    live daily file would replace one with other lines."""
    now = utcnow()
    result = Imported()
    # One open file for the check and the import: an archive renamed over this one meanwhile
    # is not read; one written over in place fails its entry's hash, read again below.
    with _opened(path) as file:
        manifest = _checked(file, path)
        file.seek(0)
        with tarfile.open(fileobj=file, mode="r:") as archive:
            members = {member.name: member for member in archive.getmembers()}

            def entry(name: str) -> IO[bytes]:
                extracted = archive.extractfile(members[name])
                assert extracted is not None
                return extracted

            def blob(name: str) -> bytes:
                data = entry(name).read()
                _unchanged(name, hashlib.sha256(data), manifest.entries[name]["sha256"])
                return data

            def rows(table: str) -> Iterator[list[dict[str, Any]]]:
                name = f"{table}.jsonl"
                if name not in members:
                    return iter(())
                return _batches(name, entry(name), manifest.entries[name]["sha256"])

            def restore(tx: Tx) -> None:
                for batch in rows("signals"):
                    result.signals += tx.signals.restore(batch, now)
                for batch in rows("marks"):
                    result.marks += tx.marks.restore(batch, [])
                for batch in rows("reinforcements"):  # (after every mark: they refer to one)
                    tx.marks.restore([], batch)
                for batch in rows("seeds"):
                    tx.seeds.restore(batch)
                for batch in rows("tombstones"):
                    tx.tombstones.restore(batch)

            live = _live_to_write(
                daily_dir, {n: blob(n) for n in sorted(members) if n.startswith(LIVE_PREFIX)}
            )
            try:
                store.write_sync(restore)
            except DeliveriesPending as exc:
                raise ArchiveRefused(str(exc)) from None
            for name in sorted(n for n in members if n.startswith(DAILY_PREFIX)):
                _restore_daily(daily_dir / "archive", name, blob(name), result)
    daily_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name, data in live.items():
        target = daily_dir / name.removeprefix(LIVE_PREFIX)
        if _link_new(target, data):
            result.live_files += 1
        else:  # the day was written on while we imported: the person's file is kept
            result.daily_conflicts.append(str(target))
    return result


def _live_to_write(daily_dir: Path, blobs: dict[str, bytes]) -> dict[str, bytes]:
    """The archive's live daily files that the day here does not hold yet, by entry.
    Raises :class:`ArchiveRefused`, before anything is written, if a live file of such a
    day exists here with other lines: it is the person's log, neither replaced nor merged."""
    wanted: dict[str, bytes] = {}
    clashes: list[tuple[str, Path]] = []
    for name in sorted(n for n in blobs if n.startswith(LIVE_PREFIX)):
        file_name = name.removeprefix(LIVE_PREFIX)
        live = daily_dir / file_name
        held = _regular_bytes(daily_dir / "archive" / file_name) + _regular_bytes(live)
        if (b"\n" + blobs[name]) in (b"\n" + held):
            continue  # imported before (and perhaps consolidated, or written on, since)
        if live.is_symlink() or live.exists():
            clashes.append((name, live))
        else:
            wanted[name] = blobs[name]
    if clashes:
        paths = ", ".join(str(p) for _, p in clashes)
        raise ArchiveRefused(
            f"the live daily file {paths} exists with other lines than the archive's; move it "
            "aside (or merge the two by hand) and import again",
            clashes[0][0],
        )
    return wanted


def _regular_bytes(path: Path) -> bytes:
    """The file's bytes; nothing for a missing file or one that is not a regular file."""
    if path.is_symlink() or not path.is_file():
        return b""
    return path.read_bytes()


def _restore_daily(directory: Path, name: str, blob: bytes, result: Imported) -> None:
    """Write a daily archive file that does not exist yet; an existing one is the user's and
    is kept (a different one is reported)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = directory / name.removeprefix(DAILY_PREFIX)
    if not (target.is_symlink() or target.exists()) and _link_new(target, blob):
        result.daily_files += 1
    elif target.is_symlink() or target.read_bytes() != blob:
        result.daily_conflicts.append(str(target))


def _link_new(target: Path, data: bytes) -> bool:
    """Create ``target`` whole or not at all, never replacing a file that appeared meanwhile;
    whether it was created."""
    with whole_file(target.parent) as whole:
        whole.file.write(data)
        return whole.name_as(target, replace=False)
