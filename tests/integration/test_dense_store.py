"""The stored vectors beside their memory-mapped copy, searched while they change: recall
must not wait for the worker's durable commit (on a 1M-line store it held every semantic
recall for it), and must never find what a change erases."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as Timeout
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from daemon.core.vectors import DAILY, LIVE, NewVector, Place, Vector
from daemon.store import Store

np = pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")

DAY = date(2026, 4, 11)


class HeldTransactions:
    """``store.write_sync`` held at its start until released: a slow durable commit."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered, self.released = threading.Event(), threading.Event()
        write_sync = store.write_sync

        def held(work: Callable[[Any], Any]) -> Any:
            self.entered.set()
            self.released.wait(10)
            return write_sync(work)

        monkeypatch.setattr(store, "write_sync", held)


def test_a_search_goes_on_while_the_worker_stores_vectors_and_then_sees_them(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_fusion import stored_parts

    from daemon.search.fusion import meaning_hash
    from daemon.search.vector_file import LIVE_LINE, quantize

    parts = stored_parts(store, tmp_path)

    def line(part: int, text: str) -> NewVector:
        values, scale = quantize(parts.semantic.embedder.embed([text])[0])
        place = Place(DAILY, DAY.isoformat(), LIVE, part)
        return NewVector(place, meaning_hash((text,)), Vector(values.tobytes(), scale))

    query = parts.semantic.embed_query("violin concert")

    def search() -> list[int]:
        found = parts.vectors.nearest(query, 5, kinds=(LIVE_LINE,), floor=0.2)
        return sorted(f.part for f in found)

    parts.vectors.write([line(1, "violin practice")])
    held = HeldTransactions(store, monkeypatch)
    writing = threading.Thread(target=parts.vectors.write, args=([line(2, "cello concert")],))
    writing.start()
    with ThreadPoolExecutor(1) as pool:
        try:
            assert held.entered.wait(5)
            assert pool.submit(search).result(timeout=2) == [1]  # the file as it was
        finally:
            held.released.set()
            writing.join(10)
    assert search() == [1, 2]

    erasing = threading.Thread(
        target=parts.vectors.delete,
        args=(lambda dense: dense.drop_group(DAILY, DAY.isoformat(), LIVE),),
    )
    held.entered.clear()
    held.released.clear()
    erasing.start()
    with ThreadPoolExecutor(1) as pool:
        try:
            assert held.entered.wait(5)
            waiting = pool.submit(search)
            with pytest.raises(Timeout):  # it might find what is being erased
                waiting.result(timeout=0.3)
        finally:
            held.released.set()
            erasing.join(10)
        assert waiting.result(timeout=10) == []


def test_the_marks_found_by_meaning_are_looked_up_only_in_their_workspace(store: Store) -> None:
    """The vector file keys a mark by a checksum of its workspace; the store's look-up of
    the marks found keeps only the workspace asked for (two names may share a checksum)."""
    from daemon.core.vectors import MARKS

    rows = [
        NewVector(Place(MARKS, mark, scope=workspace), bytes([n]) * 32, Vector(b"\x01" * 4, 1.0))
        for n, (mark, workspace) in enumerate((("mk_home", "home"), ("mk_work", "work")))
    ]
    stored, _ = store.write_sync(lambda tx: tx.dense.put(rows))
    ids = [row.id for row in stored]
    assert store.read_sync(lambda tx: tx.dense.mark_sources(ids, "home")) == {ids[0]: "mk_home"}
    both = store.read_sync(lambda tx: tx.dense.mark_sources([*ids, 999], None))
    assert both == {ids[0]: "mk_home", ids[1]: "mk_work"}


def vector_ids(store: Store) -> dict[str, int]:
    """Each mark's vector's id, as the store has it."""
    found = store.read_sync(lambda tx: tx.dense.mark_sources(tx.dense.ids(), None))
    return {mark_id: id_ for id_, mark_id in found.items()}


def test_the_daemon_looks_the_marks_found_up_in_memory_and_keeps_them_current(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search by meaning finds vectors; the daemon names their marks without reading the
    store (200 rows a recall, 1-2 ms), and its map follows every write and erasure. The
    CLI, which may not write, asks the store."""
    from daemon.core.vectors import MARKS
    from daemon.services.dense_store import StoredVectors

    def mark(mark_id: str, workspace: str, n: int) -> NewVector:
        place = Place(MARKS, mark_id, scope=workspace)
        return NewVector(place, bytes([n]) * 32, Vector(bytes([n]) * 256, 1.0))

    daemon = StoredVectors(store, tmp_path / "vectors", "meaning-test", 256, writable=True)
    daemon.prepare(lambda: False)
    daemon.write([mark("mk_home", "home", 1), mark("mk_work", "work", 2)])
    ids = vector_ids(store)
    restarted = StoredVectors(store, tmp_path / "vectors", "meaning-test", 256, writable=True)
    restarted.prepare(lambda: False)
    cli = StoredVectors(store, tmp_path / "vectors", "meaning-test", 256, writable=False)

    def no_reads(work: Callable[[Any], Any]) -> Any:
        raise AssertionError("the store was read")

    with monkeypatch.context() as patched:
        patched.setattr(store, "read_sync", no_reads)
        for vectors in (daemon, restarted):
            assert vectors.marks_of([ids["mk_home"], ids["mk_work"], 999], "home") == {
                ids["mk_home"]: "mk_home"
            }
            assert vectors.marks_of([ids["mk_work"]], None) == {ids["mk_work"]: "mk_work"}
        with pytest.raises(AssertionError, match="the store was read"):
            cli.marks_of([ids["mk_home"]], None)
    assert cli.marks_of([ids["mk_home"]], "home") == {ids["mk_home"]: "mk_home"}

    daemon.write([mark("mk_home", "home", 3)])  # its text changed: a new vector
    daemon.delete(lambda dense: dense.delete_ids([ids["mk_work"]]))  # forgotten
    assert vector_ids(store).keys() == {"mk_home"}
    moved = vector_ids(store)["mk_home"]
    assert moved != ids["mk_home"]
    assert daemon.marks_of([ids["mk_home"], ids["mk_work"], moved], None) == {moved: "mk_home"}


def test_a_forget_between_the_daemons_open_and_its_repair_leaves_the_file_to_repair(
    store: Store, tmp_path: Path
) -> None:
    """The daemon opens its vectors before it serves and repairs a stale file later, in
    the worker: a forget in between must not mark the file current, or the repair would
    be skipped and what the file lacks never searched."""
    from daemon.core.vectors import MARKS
    from daemon.search.vector_file import MARK
    from daemon.services.dense_store import StoredVectors

    def mark(mark_id: str, n: int) -> NewVector:
        return NewVector(
            Place(MARKS, mark_id, scope="home"), bytes([n]) * 32, Vector(b"\x01" * 256, 1.0)
        )

    def opened() -> StoredVectors:
        return StoredVectors(store, tmp_path / "vectors", "meaning-test", 256, writable=True)

    before = opened()
    before.prepare(lambda: False)
    before.write([mark("mk_forgotten", 1)])
    before.close()
    # Stored while no daemon held the file (a crash between the two): the file lacks it.
    store.write_sync(lambda tx: (tx.dense.put([mark("mk_kept", 2)]), tx.dense.changed()))
    forgotten = vector_ids(store)["mk_forgotten"]

    daemon = opened()
    daemon.open()
    daemon.delete(lambda dense: dense.delete_ids([forgotten]))
    daemon.prepare(lambda: False)

    query = np.ones(256, dtype=np.float32) / 16
    found = daemon.nearest(query, 5, kinds=(MARK,), floor=0.0)
    assert daemon.marks_of([f.id for f in found], "home") == {found[0].id: "mk_kept"}
    reader = StoredVectors(store, tmp_path / "vectors", "meaning-test", 256, writable=False)
    assert reader.embedded == 1  # current, and holding only what the store holds


def test_the_vector_files_of_the_release_before_are_rebuilt_from_the_rows_alike(
    store: Store, tmp_path: Path
) -> None:
    """Before, one matrix held the int8 values of lines and marks together, under a header
    naming no layout. The daemon's start finds it not current and rebuilds both files from
    the store's rows; until then the CLI ranks by words alone."""
    from test_fusion import stored_parts

    from daemon.core.vectors import MARKS
    from daemon.search.fusion import meaning_hash
    from daemon.search.vector_file import LIVE_LINE, MARK, quantize
    from daemon.services.dense_store import StoredVectors

    parts = stored_parts(store, tmp_path)

    def new(place: Place, text: str) -> NewVector:
        values, scale = quantize(parts.semantic.embedder.embed([text])[0])
        return NewVector(place, meaning_hash((text,)), Vector(values.tobytes(), scale))

    parts.vectors.write(
        [
            new(Place(DAILY, DAY.isoformat(), LIVE, 1), "violin practice"),
            new(Place(MARKS, "mk_violin", scope="home"), "plays the violin"),
        ]
    )

    def answers(vectors: StoredVectors) -> tuple[list[int], dict[str, float]]:
        query = parts.semantic.embed_query("violin concert")
        lines = vectors.nearest(query, 5, kinds=(LIVE_LINE,), floor=0.2)
        marks = vectors.nearest(query, 5, kinds=(MARK,), floor=0.2)
        sources = store.read_sync(lambda tx: tx.dense.mark_sources([m.id for m in marks], None))
        return [f.part for f in lines], {sources[m.id]: round(m.similarity, 3) for m in marks}

    before = answers(parts.vectors)
    assert before[0] == [1] and list(before[1]) == ["mk_violin"]
    parts.vectors.close()
    # The files as the release before leaves them: one matrix of int8 values, both rows.
    held = [held_rows(tmp_path / name, 256) for name in ("vectors", "vectors.marks")]
    np.concatenate([values for values, _ in held]).tofile(tmp_path / "vectors.i8")
    np.concatenate([slots for _, slots in held]).tofile(tmp_path / "vectors.slots")
    header = tmp_path / "vectors.json"
    generation = json.loads(header.read_text())["generation"]
    header.write_text(
        json.dumps({"model": "meaning-test", "dimension": 256, "generation": generation})
    )
    for part in ("i8", "slots", "json"):
        (tmp_path / f"vectors.marks.{part}").unlink()
    cli = StoredVectors(store, tmp_path / "vectors", "meaning-test", 256, writable=False)
    assert cli.embedded == 0  # not current: not searched
    daemon = StoredVectors(store, tmp_path / "vectors", "meaning-test", 256, writable=True)
    daemon.prepare(lambda: False)
    assert daemon.embedded == 2
    assert answers(daemon) == before
    assert '"layout"' in header.read_text() and (tmp_path / "vectors.marks.i8").is_file()


def held_rows(base: Path, dimension: int) -> tuple[Any, Any]:
    """The int8 values and the slots of the rows a vector file holds."""
    from daemon.search.vector_file import FREE, SLOT

    values = np.fromfile(base.with_name(base.name + ".i8"), np.uint8).reshape(-1, dimension)
    slots = np.fromfile(base.with_name(base.name + ".slots"), SLOT)
    used = slots["kind"] != FREE
    return (values[used] ^ np.uint8(0x80)).view(np.int8), slots[used]
