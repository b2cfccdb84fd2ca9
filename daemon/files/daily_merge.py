"""The day files' format: their names, lines as an editor numbers them (and a redaction
that keeps those numbers), a claim and its merge into the
archive (step 1 and 2 in :mod:`daemon.files.daily`'s docstring)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import structlog

from daemon.core.days import InvalidDay, parse_day
from daemon.core.lines import split_lines
from daemon.fs import Folder, RefusedFile, scan_directory

log = structlog.get_logger("cambium.daily")

SUFFIX = ".md"


@dataclass(frozen=True, slots=True)
class Claim:
    """A day's lines taken for consolidation. ``offset`` is how many lines the archive
    holds before them, so line ``n`` of the claim becomes archive line ``offset + n``.
    ``leftover``: the claim was made by an earlier, interrupted consolidation."""

    day: date
    lines: list[str]
    offset: int
    leftover: bool


def file_name(day: date) -> str:
    return f"{day.isoformat()}{SUFFIX}"


def staging_name(day: date) -> str:
    return f".{day.isoformat()}{SUFFIX}.incoming"


def archived_lines(archive: Folder, day: date) -> list[str]:
    """The archive's lines before any merge in progress."""
    return split_lines(archived_bytes(archive, day, archive.read(file_name(day)) or b""))


def claims(archive_directory: Path) -> Iterator[tuple[date, os.DirEntry[str]]]:
    """The claims in an archive directory not yet merged, by day."""
    for entry in scan_directory(archive_directory):
        name = entry.name
        if name.startswith(".") and name.endswith(f"{SUFFIX}.incoming"):
            try:
                yield parse_day(name[1:].removesuffix(f"{SUFFIX}.incoming")), entry
            except InvalidDay:
                continue


def record_name(day: date) -> str:
    return f".{day.isoformat()}{SUFFIX}.merge"


def archived_bytes(archive: Folder, day: date, data: bytes) -> bytes:
    """The archive's bytes ``data`` as far as they come before a merge in progress."""
    if archive.kind(staging_name(day)) is not None:
        recorded = archive.read(record_name(day))
        if recorded is not None:
            return data[: int(recorded)]
    return data


def merge(archive: Folder, day: date) -> bool:
    """Step 1 and 2 of the merge (see the module's docstring); the caller holds the lock.
    Whether there was a claim to merge."""
    staging, record, target = staging_name(day), record_name(day), file_name(day)
    kind = archive.kind(staging)
    if kind is None:
        # Either nothing was pending, or only the record's deletion was left to do.
        archive.remove(record)
        return False
    if kind != "file":
        raise RefusedFile(0, "refused: not a regular file", str(archive.path / staging))
    if archive.kind(target) is None:
        archive.move(staging, archive, target)
        return True
    recorded = archive.read(record)
    current = archive.read(target) or b""
    if recorded is not None:
        base = int(recorded)
    else:
        base = len(current)
        archive.replace(record, f"{base}\n".encode("ascii"))
    incoming = archive.read(staging) or b""
    last = current[base - 1 : base] if base else b"\n"
    payload = (b"" if last == b"\n" else b"\n") + incoming
    if incoming and not incoming.endswith(b"\n"):
        payload += b"\n"
    already = current[base:]
    if already.startswith(payload):
        missing = b""
    elif payload.startswith(already):
        missing = payload[len(already) :]  # an append was cut short
    else:
        # The archive changed under us in a way no interrupted run explains (edited by
        # hand?). Appending everything may repeat lines but loses none.
        log.warning("daily archive changed during a merge", day=day.isoformat())
        missing = payload
    if missing:
        archive.append(target, missing, whole_lines=False)
    # The staging file goes before the record: a staging file without a record means
    # "nothing appended yet", so the record must outlive it.
    archive.remove(staging)
    archive.remove(record)
    return True


def redacted_lines(data: bytes, numbers: set[int], marker: bytes) -> tuple[bytes, int]:
    """``data`` with its lines ``numbers`` (1-indexed, as
    :func:`~daemon.core.lines.split_lines` numbers them) replaced by ``marker``, each keeping
    its line ending, and how many changed."""
    lines = data.split(b"\n")
    changed = 0
    for number in sorted(numbers):
        if not 1 <= number <= len(lines) or (number == len(lines) and not lines[-1]):
            continue
        ending = b"\r" if lines[number - 1].endswith(b"\r") else b""
        if lines[number - 1] != marker + ending:
            lines[number - 1] = marker + ending
            changed += 1
    return b"\n".join(lines), changed
