"""The names of a day's files in the daily directory, and the merge of a claim into the
archive (step 1 and 2 in :mod:`daemon.files.daily`'s docstring)."""

from __future__ import annotations

from datetime import date

import structlog

from daemon.files.fs import Folder, RefusedFile

log = structlog.get_logger("cambium.daily")

SUFFIX = ".md"


def file_name(day: date) -> str:
    return f"{day.isoformat()}{SUFFIX}"


def staging_name(day: date) -> str:
    return f".{day.isoformat()}{SUFFIX}.incoming"


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
