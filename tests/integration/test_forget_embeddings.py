"""Forgetting reaches the stored vectors: when archived lines are redacted and a mark is
forgotten, the vectors of what they said (the lines', and their neighbours', whose window
held them) are deleted from the store and zeroed in the memory-mapped file recall searches.
Checked on the bytes of the SQLite files (db, -wal, the vector file) and by query on
PostgreSQL."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from test_marks_store import T0, insert, make_mark

from daemon.files.daily import DailyLog
from daemon.store import Store, StoreTextIndex

np = pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")
semantic = pytest.importorskip(
    "daemon.search.semantic", reason="needs pip install 'cambium-memory[semantic]'"
)

DAY = date(2026, 4, 11)
SECRET = "Okafor"
LINES = ["lunch with Bea by the river", f"dentist with Dr {SECRET} on Friday", "a long nap"]
OBSERVED = f"Dr {SECRET}'s practice is on Elm Street"


def on_disk(store: Store, vectors: Path) -> bytes:
    """The bytes of every file that may hold a vector: the store's (SQLite) and the copy."""
    found = b"".join(p.read_bytes() for p in vectors.parent.glob(f"{vectors.name}.*"))
    if store.dialect == "sqlite":
        database = Path(store.url.removeprefix("sqlite:///"))
        for path in (database, database.with_name(database.name + "-wal")):
            found += path.read_bytes() if path.exists() else b""
    return found


def test_forgotten_lines_and_marks_leave_no_vector_behind(store: Store, tmp_path: Path) -> None:
    from test_fusion import stored_parts

    from daemon.search.fusion import meaning_hash
    from daemon.search.vector_file import offset
    from daemon.services.embedding_worker import document_hashes

    archive = tmp_path / "daily" / "archive"
    archive.mkdir(parents=True)
    (archive / f"{DAY}.md").write_text("\n".join(LINES) + "\n")
    base = tmp_path / "vectors"
    parts = stored_parts(store, tmp_path)
    daily = DailyLog(tmp_path / "daily", parts.lines, index=StoreTextIndex(store))
    index = parts.mark_search()
    worker = parts.attach(daily, index)
    insert(store, make_mark("mk_secret", "user.health", observation=OBSERVED))
    insert(store, make_mark("mk_kept", "user.food", observation="figs for breakfast"))
    daily.refresh()
    worker.run_once()

    # Every line's window holds the secret line: all three documents are the forgotten's.
    forgotten = [*document_hashes(LINES), meaning_hash((OBSERVED,))]
    stored = store.read_sync(lambda tx: tx.dense.by_hash(forgotten))
    assert set(stored) == set(forgotten)
    values = [vector.values for vector in stored.values()]
    laid_out = [offset(value).tobytes() for value in values]  # as the search's copy holds them
    before = on_disk(store, base)
    assert all(value in before for value in laid_out)  # the check would see them
    if store.dialect == "sqlite":
        assert all(digest in before for digest in forgotten)

    daily.redact_archive({DAY: [2]}, "[forgotten: tb_1]")
    store.write_sync(lambda tx: tx.marks.erase(["mk_secret"], "asked", T0))
    assert index.erase_outdated() == 1
    store.scrub()

    assert store.read_sync(lambda tx: tx.dense.by_hash(forgotten)) == {}
    after = on_disk(store, base)
    assert not any(value in after for value in values + laid_out)
    assert not any(digest in after for digest in forgotten)
    # The day is embedded again as it is now; the kept mark keeps its vector.
    worker.run_once()
    assert store.read_sync(lambda tx: tx.dense.by_hash(forgotten)) == {}
    now = document_hashes([LINES[0], "[forgotten: tb_1]", LINES[2]])
    assert set(store.read_sync(lambda tx: tx.dense.by_hash(now))) == set(now)
    assert search_marks(store, index, "figs") == ["mk_kept"]


def search_marks(store: Store, index: object, about: str) -> list[str]:
    return store.read_sync(lambda tx: index.search(tx, "w", about))  # type: ignore[attr-defined]
