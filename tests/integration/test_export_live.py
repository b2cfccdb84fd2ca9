"""An export carries everything a person wrote: the live daily files (today's log, and any
day not consolidated yet) beside the archived ones, and an import restores them, byte for
byte, on either store; never over a live file that holds other lines."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from datetime import date, timedelta
from pathlib import Path

import pytest
import test_archive
from support import T0
from test_archive import FIRST_DAY, counts, simulate_week

from daemon.files.daily import DailyLog
from daemon.services.archive import (
    ArchiveRefused,
    content_hash,
    export_archive,
    import_archive,
    read_archive,
)
from daemon.store import Store

source = test_archive.source  # the fixture: a SQLite store the week is written to

TODAY = FIRST_DAY + timedelta(days=7)  # the week's days are archived; this one is live


def day_files(daily_dir: Path) -> dict[str, bytes]:
    """Every day file's bytes, live and archived, by its path under the daily directory."""
    return {
        str(path.relative_to(daily_dir)): path.read_bytes()
        for path in sorted(daily_dir.rglob("*.md"))
    }


async def week_and_today(store: Store, daily_dir: Path) -> None:
    await simulate_week(store, daily_dir)
    daily = DailyLog(daily_dir)
    for line in ("breakfast: porridge", "OBS subject=user.mood feeling 9/10"):
        daily.append(TODAY, line)
    daily.append(TODAY - timedelta(days=1), "a late line for a day archived already")


@pytest.mark.asyncio
async def test_the_live_daily_files_round_trip_byte_for_byte(
    source: Store, store: Store, tmp_path: Path
) -> None:
    await week_and_today(source, tmp_path / "daily")
    written = day_files(tmp_path / "daily")
    assert f"{TODAY}.md" in written and f"archive/{TODAY - timedelta(days=1)}.md" in written

    manifest = export_archive(source, tmp_path / "daily", tmp_path / "out.tar", T0)
    assert {n for n in manifest.entries if n.startswith("daily/live/")} == {
        f"daily/live/{TODAY}.md",
        f"daily/live/{TODAY - timedelta(days=1)}.md",
    }
    assert manifest.to_json()["version"] == 2

    imported = import_archive(store, tmp_path / "new", tmp_path / "out.tar")
    assert (imported.daily_files, imported.live_files, imported.daily_conflicts) == (7, 2, [])
    assert day_files(tmp_path / "new") == written
    assert counts(store) == counts(source)

    # Imported again, after the new machine consolidated today: nothing is written twice.
    DailyLog(tmp_path / "new").archive(TODAY)
    after = day_files(tmp_path / "new")
    again = import_archive(store, tmp_path / "new", tmp_path / "out.tar")
    assert (again.daily_files, again.live_files) == (0, 0)
    assert day_files(tmp_path / "new") == after


@pytest.mark.asyncio
async def test_a_live_file_with_other_lines_refuses_the_import_and_nothing_is_written(
    source: Store, store: Store, tmp_path: Path
) -> None:
    await week_and_today(source, tmp_path / "daily")
    export_archive(source, tmp_path / "daily", tmp_path / "out.tar", T0)
    mine = tmp_path / "new" / f"{TODAY}.md"
    mine.parent.mkdir()
    mine.write_bytes(b"already written here today\n")

    with pytest.raises(ArchiveRefused) as refused:
        import_archive(store, tmp_path / "new", tmp_path / "out.tar")
    assert refused.value.entry == f"daily/live/{TODAY}.md"
    assert str(mine) in str(refused.value)
    assert counts(store) == (0, 0, 0, 0)
    assert day_files(tmp_path / "new") == {f"{TODAY}.md": b"already written here today\n"}

    # The same day continued here (the archive's lines, then more): the day holds them.
    mine.write_bytes(
        (tmp_path / "daily" / f"{TODAY}.md").read_bytes() + b"and a line written here\n"
    )
    imported = import_archive(store, tmp_path / "new", tmp_path / "out.tar")
    assert (imported.live_files, imported.daily_conflicts) == (1, [])  # the other live day
    assert mine.read_bytes().endswith(b"and a line written here\n")


def rewritten(path: Path, version: int, extra: dict[str, bytes]) -> Path:
    """``path``'s archive with its manifest saying ``version`` and ``extra`` entries added."""
    manifest = read_archive(path)
    with tarfile.open(path) as archive:
        blobs = {
            member.name: extracted.read()
            for member in archive.getmembers()
            if member.name != "manifest.json" and (extracted := archive.extractfile(member))
        }
    blobs |= extra
    entries = manifest.entries | {
        name: {"sha256": hashlib.sha256(b).hexdigest(), "bytes": len(b)}
        for name, b in extra.items()
    }
    raw = manifest.to_json() | {
        "version": version,
        "entries": entries,
        "content_hash": content_hash(entries),
    }
    out = path.with_name(f"v{version}-{path.name}")
    with tarfile.open(out, "w") as archive:
        for name, blob in [("manifest.json", json.dumps(raw).encode()), *sorted(blobs.items())]:
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            archive.addfile(info, io.BytesIO(blob))
    return out


@pytest.mark.asyncio
async def test_a_version_1_archive_is_still_imported_and_cannot_carry_live_files(
    source: Store, store: Store, tmp_path: Path
) -> None:
    await simulate_week(source, tmp_path / "daily")  # every day archived: what v1 carried
    export_archive(source, tmp_path / "daily", tmp_path / "out.tar", T0)
    old = rewritten(tmp_path / "out.tar", 1, {})
    imported = import_archive(store, tmp_path / "new", old)
    assert (imported.daily_files, imported.live_files) == (7, 0)
    assert day_files(tmp_path / "new") == day_files(tmp_path / "daily")

    odd = rewritten(tmp_path / "out.tar", 1, {f"daily/live/{date(2026, 4, 20)}.md": b"x\n"})
    with pytest.raises(ArchiveRefused, match="is not an entry format version 1 has"):
        read_archive(odd)
