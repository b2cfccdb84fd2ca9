"""``cambium export`` / ``import``: a week of memory carried from SQLite to another store
(SQLite, and PostgreSQL when configured) and back, hash for hash."""

from __future__ import annotations

import os
import tarfile
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from functools import partial
from pathlib import Path

import pytest
from support import FAST_RETRY, T0, emit_and_settle, make_signal

from daemon.bus import SignalBus
from daemon.composition import build_receptors
from daemon.config import parse_config
from daemon.core.records import Mark
from daemon.files.daily import DailyLog
from daemon.services import archive
from daemon.services.archive import ArchiveRefused, export_archive, import_archive, read_archive
from daemon.store import NewSignal, Store, Tx, sql
from daemon.store.migrate import upgrade

FIRST_DAY = date(2026, 4, 11)


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Store]:
    url = f"sqlite:///{tmp_path}/source.db"
    upgrade(url)
    store = Store(url)
    store.start()
    try:
        yield store
    finally:
        store.close()


async def simulate_week(store: Store, daily_dir: Path) -> None:
    """Seven days: observations (some repeated), daily notes consolidated each night,
    seeds planted and reviewed, a correction, a retraction and a forget."""
    config = parse_config({"timezone": "UTC", "paths": {"daily": str(daily_dir)}})
    receptors = build_receptors(config, store, DailyLog(daily_dir))
    async with SignalBus(store, receptors, retry=FAST_RETRY) as bus:
        marks: list[str] = []
        for n in range(7):
            at = T0 + timedelta(days=n)
            day = (FIRST_DAY + timedelta(days=n)).isoformat()
            for subject, said in (
                ("user.food", f"ate dish number {n % 3}"),
                ("user.health.sleep", f"slept {6 + n % 2} hours"),
            ):
                signal = make_signal(
                    "memory.observation",
                    {"subject": subject, "observation": said, "evidence": {"note": "chat"}},
                    emitted_at=at,
                )
                await emit_and_settle(bus, signal)
                marks.append(Mark.id_for_signal(signal.id))
            for line in (f"walked {n + 2} km", f"OBS subject=user.mood feeling {n}/10"):
                note = make_signal("memory.daily_note", {"text": line, "date": day}, emitted_at=at)
                await emit_and_settle(bus, note)
            night = at + timedelta(days=1)
            await emit_and_settle(
                bus, make_signal("memory.consolidate", {"date": day}, emitted_at=night)
            )
        seed = make_signal(
            "memory.seed_planted",
            {
                "subject": "user.food",
                "proposed_change": "likes dish number 1 most",
                "target_file": "USER.md",
                "based_on_marks": [marks[2]],
            },
            emitted_at=T0 + timedelta(days=6),
        )
        await emit_and_settle(bus, seed)
        [planted] = store.read_sync(lambda tx: tx.seeds.listing("default"))
        for kind, payload in (
            (
                "memory.seed_reviewed",
                {"seed_id": planted.id, "decision": "accepted", "reviewer": "ada"},
            ),
            (
                "memory.mark_corrected",
                {"mark_id": marks[0], "text": "ate dish 0", "reason": "typo"},
            ),
            ("memory.mark_retracted", {"mark_id": marks[4], "reason": "wrong"}),
            ("memory.forget", {"subject": "user.health", "reason": "private"}),
        ):
            signal = make_signal(kind, payload, emitted_at=T0 + timedelta(days=7))
            status = await emit_and_settle(bus, signal)
            assert set(status.values()) == {"delivered"}, (kind, status)


def counts(store: Store) -> tuple[int, int, int, int]:
    def read(tx: object) -> tuple[int, int, int, int]:
        from daemon.store import Tx

        assert isinstance(tx, Tx)
        return (
            len(list(tx.signals.all_rows())),
            len(list(tx.marks.all_rows())),
            len(list(tx.seeds.all_rows())),
            len(list(tx.tombstones.all_rows())),
        )

    return store.read_sync(read)


@pytest.mark.asyncio
async def test_a_week_round_trips_with_equal_content_hashes(
    source: Store, store: Store, tmp_path: Path
) -> None:
    await simulate_week(source, tmp_path / "daily")
    first = export_archive(source, tmp_path / "daily", tmp_path / "week.tar", T0)
    assert {name for name in first.entries if name.startswith("daily/archive/")} == {
        f"daily/archive/{FIRST_DAY + timedelta(days=n)}.md" for n in range(7)
    }
    signals, marks, seeds, tombstones = counts(source)
    assert signals == 7 * 5 + 5 and marks > 10 and (seeds, tombstones) == (1, 1)

    imported = import_archive(store, tmp_path / "elsewhere", tmp_path / "week.tar")
    assert (imported.signals, imported.marks, imported.daily_files) == (signals, marks, 7)
    assert counts(store) == counts(source)
    second = export_archive(
        store, tmp_path / "elsewhere", tmp_path / "again.tar", T0 + timedelta(1)
    )
    assert second.content_hash == first.content_hash
    assert second.entries == first.entries

    again = import_archive(store, tmp_path / "elsewhere", tmp_path / "week.tar")
    assert (again.signals, again.marks, again.daily_files, again.daily_conflicts) == (0, 0, 0, [])
    assert counts(store) == counts(source)

    # And back: the target's export into a fresh SQLite store gives the same content.
    back_url = f"sqlite:///{tmp_path}/back.db"
    upgrade(back_url)
    back = Store(back_url)
    try:
        import_archive(back, tmp_path / "back-daily", tmp_path / "again.tar")
        third = export_archive(back, tmp_path / "back-daily", tmp_path / "back.tar", T0)
    finally:
        back.close()
    assert third.content_hash == first.content_hash


def append(signals: list[NewSignal], tx: Tx) -> None:
    tx.signals.append(signals)


def peak_memory(run: Callable[[], object]) -> int:
    """The most memory Python held while ``run`` ran, in bytes."""
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_export_and_import_hold_a_batch_of_rows_not_the_whole_memory(
    source: Store, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three years of notes and signals held 1.4 GB to export and 2.4 GB to import: both
    now read and write a batch of rows at a time (batches made small here, so 5,000
    signals are 50 of them)."""
    monkeypatch.setattr(sql, "STREAM_BATCH", 100)
    monkeypatch.setattr(archive, "BATCH", 100)
    said = "noticed that the morning walk along the river " * 4
    signals = [
        NewSignal(
            make_signal(
                "memory.observation",
                {"subject": f"user.walks.n{n}", "observation": said, "evidence": {"note": "x"}},
            ),
            T0,
        )
        for n in range(5_000)
    ]
    source.write_sync(partial(append, signals))
    signals.clear()

    out = tmp_path / "big.tar"
    exporting = peak_memory(lambda: export_archive(source, tmp_path / "daily", out, T0))
    importing = peak_memory(lambda: import_archive(store, tmp_path / "elsewhere", out))
    # Held whole, these 5,000 signals took 18 MB to export and 28 MB to import; a batch at a
    # time, 0.3 and 3 MB (the import's hash check reads 1 MB pieces).
    assert max(exporting, importing) < 8_000_000, (exporting, importing)
    assert counts(store) == counts(source)
    assert store.read_sync(lambda tx: tx.signals.open_counts().pending) == 0  # history
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".big.tar")]


@pytest.mark.asyncio
async def test_an_export_killed_halfway_leaves_no_copy_of_the_memory_beside_the_archive(
    source: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spool and the archive being written have no name: whenever a SIGKILL comes,
    nothing of the memory stays behind in the directory (the spool was a hidden directory
    of every entry, the partial archive a hidden file, both left there by a kill)."""
    await simulate_week(source, tmp_path / "daily")
    out = tmp_path / "exports"
    out.mkdir()
    (out / "older.tar").write_bytes(b"an earlier export")
    seen: list[list[str]] = []
    add = archive._add

    def add_and_look(*args: object) -> None:
        seen.append(sorted(p.name for p in out.iterdir()))  # what a kill now would leave
        add(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(archive, "_add", add_and_look)
    export_archive(source, tmp_path / "daily", out / "memory.tar", T0)
    assert len(seen) > 10 and all(names == ["older.tar"] for names in seen), seen
    assert sorted(p.name for p in out.iterdir()) == ["memory.tar", "older.tar"]
    assert read_archive(out / "memory.tar").entries.keys() >= {"marks.jsonl", "signals.jsonl"}


@pytest.mark.asyncio
async def test_a_flipped_byte_is_refused_naming_the_entry_and_nothing_is_written(
    source: Store, store: Store, tmp_path: Path
) -> None:
    await simulate_week(source, tmp_path / "daily")
    export_archive(source, tmp_path / "daily", tmp_path / "week.tar", T0)
    data = bytearray((tmp_path / "week.tar").read_bytes())
    with tarfile.open(tmp_path / "week.tar") as archive:
        offset = archive.getmember("marks.jsonl").offset_data
    data[offset + 40] ^= 0x01
    (tmp_path / "bad.tar").write_bytes(bytes(data))

    with pytest.raises(ArchiveRefused) as refused:
        import_archive(store, tmp_path / "target-daily", tmp_path / "bad.tar")
    assert refused.value.entry == "marks.jsonl"
    assert "SHA-256 does not match" in str(refused.value)
    assert counts(store) == (0, 0, 0, 0)
    assert not (tmp_path / "target-daily").exists()


@pytest.mark.asyncio
async def test_an_archive_changed_between_its_check_and_its_import_is_never_imported_unchecked(
    source: Store, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive was opened twice, once to check it and once to import it: what was
    imported need not be what was checked. Now one open file serves both, and every entry
    is checked again as it is imported."""
    await simulate_week(source, tmp_path / "daily")
    week = tmp_path / "week.tar"
    export_archive(source, tmp_path / "daily", week, T0)
    with tarfile.open(week) as tar:
        offset = tar.getmember("marks.jsonl").offset_data
    other = tmp_path / "other.tar"
    export_archive(store, tmp_path / "nothing", other, T0)  # an empty memory's archive
    checked = archive._checked

    def then_replaced(file: object, path: Path) -> archive.Manifest:
        manifest = checked(file, path)  # type: ignore[arg-type]
        os.replace(other, week)  # say, an export to the same path finishing now
        return manifest

    monkeypatch.setattr(archive, "_checked", then_replaced)
    imported = import_archive(store, tmp_path / "elsewhere", week)
    assert imported.marks > 10 and counts(store) == counts(source), "the file checked"

    export_archive(source, tmp_path / "daily", week, T0)
    fresh = tmp_path / "fresh.db"
    upgrade(f"sqlite:///{fresh}")
    target = Store(f"sqlite:///{fresh}")

    def then_flipped(file: object, path: Path) -> archive.Manifest:
        manifest = checked(file, path)  # type: ignore[arg-type]
        with path.open("r+b") as same:  # written over in place
            same.seek(offset + 40)
            byte = same.read(1)
            same.seek(offset + 40)
            same.write(bytes([byte[0] ^ 0x01]))
        return manifest

    monkeypatch.setattr(archive, "_checked", then_flipped)
    try:
        with pytest.raises(ArchiveRefused, match="changed while it was imported") as refused:
            import_archive(target, tmp_path / "target-daily", week)
        assert refused.value.entry == "marks.jsonl"
        assert counts(target) == (0, 0, 0, 0)
    finally:
        target.close()


def test_an_unknown_format_version_is_refused(tmp_path: Path) -> None:
    import io
    import json

    manifest = json.dumps({"format": "cambium-memory-export", "version": 99}).encode()
    with tarfile.open(tmp_path / "future.tar", "w") as archive:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        archive.addfile(info, io.BytesIO(manifest))
    with pytest.raises(ArchiveRefused, match="format version 99 is not supported"):
        read_archive(tmp_path / "future.tar")
    (tmp_path / "junk.tar").write_bytes(b"not a tar at all" * 100)
    with pytest.raises(ArchiveRefused, match="not a readable archive"):
        read_archive(tmp_path / "junk.tar")


@pytest.mark.asyncio
async def test_imported_signals_are_history_not_work_for_the_receptors(
    source: Store, store: Store, tmp_path: Path
) -> None:
    """Into a store whose receptors already have cursors: what is imported counts as
    delivered. While a delivery is still pending the import is refused, nothing written."""
    await simulate_week(source, tmp_path / "daily")
    export_archive(source, tmp_path / "daily", tmp_path / "week.tar", T0)
    store.write_sync(lambda tx: tx.signals.register("observation", {"memory.observation"}, T0))
    store.write_sync(lambda tx: tx.signals.register("daily", {"memory.daily_note"}, T0))
    waiting = make_signal("memory.daily_note", {"text": "not yet written"})
    store.write_sync(lambda tx: tx.signals.append([NewSignal(waiting, T0)]))

    with pytest.raises(ArchiveRefused, match="1 deliveries are still pending"):
        import_archive(store, tmp_path / "elsewhere", tmp_path / "week.tar")
    assert counts(store)[0] == 1, "nothing imported"

    cursor = store.read_sync(lambda tx: tx.signals.cursor("daily"))
    assert cursor is not None
    seq = store.read_sync(lambda tx: tx.signals.head())
    store.write_sync(lambda tx: tx.signals.advance("daily", cursor.position, seq, T0))
    imported = import_archive(store, tmp_path / "elsewhere", tmp_path / "week.tar")

    assert imported.signals > 0
    assert store.read_sync(lambda tx: tx.signals.open_counts()).pending == 0
    assert store.read_sync(lambda tx: tx.signals.listing(status="pending", limit=500)) == []
