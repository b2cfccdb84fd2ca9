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

Import reads the whole archive and checks the format version and every hash before writing
anything; then it inserts, in one transaction, every row whose id is not stored yet
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
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from daemon.core.clock import iso, utcnow
from daemon.core.days import InvalidDay, parse_day
from daemon.store import DeliveriesPending, Store, Tx

FORMAT = "cambium-memory-export"
VERSION = 2
READABLE_VERSIONS = (1, 2)
MANIFEST = "manifest.json"
TABLES = ("signals", "marks", "reinforcements", "seeds", "tombstones")
DAILY_PREFIX = "daily/archive/"
LIVE_PREFIX = "daily/live/"  # since version 2


class ArchiveRefused(ValueError):
    """The archive cannot be imported; nothing was written. ``entry`` names the entry at
    fault, when one is."""

    def __init__(self, message: str, entry: str | None = None) -> None:
        super().__init__(f"{entry}: {message}" if entry else message)
        self.entry = entry


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


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    def encode(value: Any) -> Any:
        if isinstance(value, datetime):
            return iso(value)
        raise TypeError(f"{type(value).__name__} cannot be exported")

    return b"".join(
        json.dumps(row, sort_keys=True, ensure_ascii=False, default=encode).encode() + b"\n"
        for row in rows
    )


def _table_rows(tx: Tx) -> dict[str, list[dict[str, Any]]]:
    return {
        "signals": tx.signals.all_rows(),
        "marks": tx.marks.all_rows(),
        "reinforcements": tx.marks.all_reinforcement_rows(),
        "seeds": tx.seeds.all_rows(),
        "tombstones": tx.tombstones.all_rows(),
    }


def _day_files(directory: Path, prefix: str) -> dict[str, bytes]:
    """The day files of a directory (regular files named after a real day; nothing else,
    so neither the claims and records hidden in the archive nor anything a symlink names),
    as entries under ``prefix``."""
    found: dict[str, bytes] = {}
    if not directory.is_dir():
        return found
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if not entry.name.endswith(".md") or not entry.is_file(follow_symlinks=False):
            continue
        try:
            parse_day(entry.name.removesuffix(".md"))
        except InvalidDay:
            continue
        found[prefix + entry.name] = Path(entry.path).read_bytes()
    return found


def export_archive(store: Store, daily_dir: Path, path: Path, now: datetime) -> Manifest:
    """Write the archive to ``path`` (atomically: a crash leaves no half archive there)."""
    rows = store.read_sync(_table_rows)  # one transaction: a consistent snapshot
    data = (
        {f"{name}.jsonl": _jsonl(rows[name]) for name in TABLES}
        | _day_files(daily_dir / "archive", DAILY_PREFIX)
        | _day_files(daily_dir, LIVE_PREFIX)
    )
    entries = {name: {"sha256": _sha256(blob), "bytes": len(blob)} for name, blob in data.items()}
    manifest = Manifest(entries, content_hash(entries), iso(now))
    manifest_bytes = json.dumps(manifest.to_json(), indent=2, sort_keys=True).encode() + b"\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "wb") as file:
            with tarfile.open(fileobj=file, mode="w", format=tarfile.PAX_FORMAT) as archive:
                for name, blob in [(MANIFEST, manifest_bytes), *sorted(data.items())]:
                    info = tarfile.TarInfo(name)
                    info.size, info.mode, info.mtime = len(blob), 0o600, int(now.timestamp())
                    archive.addfile(info, io.BytesIO(blob))
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return manifest


def read_archive(path: Path) -> tuple[Manifest, dict[str, bytes]]:
    """The archive's manifest and entries, every one checked against its hash; raises
    :class:`ArchiveRefused` naming what is wrong."""
    try:
        with tarfile.open(path, mode="r:") as archive:
            members = archive.getmembers()
            blobs: dict[str, bytes] = {}
            for member in members:
                if not member.isfile():
                    raise ArchiveRefused("not a regular file", member.name)
                if member.name in blobs:
                    raise ArchiveRefused("appears twice", member.name)
                extracted = archive.extractfile(member)
                assert extracted is not None
                blobs[member.name] = extracted.read()
    except (tarfile.TarError, EOFError) as exc:
        raise ArchiveRefused(f"{path} is not a readable archive ({exc})") from None
    except OSError as exc:
        raise ArchiveRefused(f"cannot read {path}: {exc.strerror or exc}") from None
    manifest = _manifest(blobs.pop(MANIFEST, None))
    for name in sorted(set(blobs) | set(manifest.entries)):
        if name not in manifest.entries:
            raise ArchiveRefused("is not in the manifest", name)
        if name not in blobs:
            raise ArchiveRefused("is in the manifest but missing from the archive", name)
        if _sha256(blobs[name]) != manifest.entries[name].get("sha256"):
            raise ArchiveRefused("SHA-256 does not match the manifest (damaged or altered)", name)
        if name not in {f"{t}.jsonl" for t in TABLES}:
            _check_daily_name(name, manifest.version)
    if content_hash(manifest.entries) != manifest.content_hash:
        raise ArchiveRefused("content_hash does not match its entries", MANIFEST)
    return manifest, blobs


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


def _rows(name: str, blob: bytes) -> list[dict[str, Any]]:
    try:
        rows = [json.loads(line) for line in blob.decode("utf-8").splitlines() if line]
    except ValueError as exc:
        raise ArchiveRefused(f"not JSON lines ({exc})", name) from None
    if not all(isinstance(row, dict) and "id" in row for row in rows):
        raise ArchiveRefused("every line must be an object with an id", name)
    return rows


def import_archive(store: Store, daily_dir: Path, path: Path) -> Imported:
    """Check the whole archive, then add what is not there yet. Raises
    :class:`ArchiveRefused` (nothing written) for an archive that fails any check, or whose
    live daily file would replace one with other lines."""
    _, blobs = read_archive(path)
    now = utcnow()
    rows = {name: _rows(f"{name}.jsonl", blobs.get(f"{name}.jsonl", b"")) for name in TABLES}
    live = _live_to_write(daily_dir, blobs)
    result = Imported()

    def restore(tx: Tx) -> None:
        result.signals = tx.signals.restore(rows["signals"], now)
        result.marks = tx.marks.restore(rows["marks"], rows["reinforcements"])
        tx.seeds.restore(rows["seeds"])
        tx.tombstones.restore(rows["tombstones"])

    try:
        store.write_sync(restore)
    except DeliveriesPending as exc:
        raise ArchiveRefused(str(exc)) from None
    for name in sorted(n for n in blobs if n.startswith(DAILY_PREFIX)):
        _restore_daily(daily_dir / "archive", name, blobs[name], result)
    daily_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name, blob in live.items():
        target = daily_dir / name.removeprefix(LIVE_PREFIX)
        if _link_new(target, blob):
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
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.link(temporary, target)
    except FileExistsError:
        return False
    finally:
        Path(temporary).unlink(missing_ok=True)
    return True
