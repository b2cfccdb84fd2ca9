"""The substrate's files and the compost's learnings in the store's text index: kept in
step by size, mtime and hash, re-synced when the watcher names a file, read as they are by
a process that may not write the index (the CLI with the daemon down), and ranked as the
in-memory index ranked them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog
from sqlalchemy import text

from daemon.core.text_rows import COMPOST, SUBSTRATE
from daemon.files.compost import Compost, CompostHit
from daemon.files.substrate import Substrate
from daemon.search.memory_index import MemoryTextIndex
from daemon.search.text import Index
from daemon.store import Store, StoreTextIndex

NOTES = {
    "pets.md": "# Pets\n\nThe dog sleeps after lunch.\nThe cat hunts at night.\n",
    "food.md": "# Food\n\nLunch is soup. Dinner is late.\nNo coffee after noon.\n",
    "walks.md": "# Walks\n\nWalk the dog by the lake.\nThe lake is cold in March.\n",
}


def write_notes(directory: Path) -> list[Path]:
    directory.mkdir(exist_ok=True)
    for name, body in NOTES.items():
        (directory / name).write_text(body)
    return sorted(directory / name for name in NOTES)


def learnings(*strategies: str, agent: str = "a-1") -> str:
    return json.dumps(
        {
            "id": f"cmp-{agent}",
            "agent_id": agent,
            "template_id": "tpl-walks",
            "success_rate": 0.9,
            "failure_patterns": [],
            "successful_strategies": list(strategies),
            "template_improvements": [],
            "routing_hints": [],
            "composted_at": "2026-04-01T00:00:00Z",
            "reason": "end of lifetime",
        }
    )


def row_ids(store: Store, layer: str) -> list[int]:
    """The ids of the layer's rows: a row rewritten gets a new one."""
    query = text("SELECT id FROM text_rows WHERE layer = :layer ORDER BY id")
    return store.read_sync(
        lambda tx: list(tx.connection.execute(query, {"layer": layer}).scalars())
    )


def found(substrate: Substrate, query: str) -> list[str]:
    return [Path(hit.file).name for hit in substrate.search(query, 10)]


def test_a_second_start_reads_no_unchanged_substrate_or_compost_file(
    store: Store, tmp_path: Path
) -> None:
    write_notes(tmp_path / "notes")
    (tmp_path / "compost").mkdir()
    (tmp_path / "compost" / "a.json").write_text(learnings("Walk the dog early"))
    first = Substrate([tmp_path / "notes"], index=StoreTextIndex(store))
    assert found(first, "dog") == ["pets.md", "walks.md"]
    assert first.rows.reads == 3
    compost = Compost(tmp_path / "compost", index=StoreTextIndex(store))
    assert [hit.learning for hit in compost.search("dog", 10)] == ["Walk the dog early"]
    assert compost.rows.reads == 1

    restarted = Substrate([tmp_path / "notes"], index=StoreTextIndex(store))
    restarted.prepare_search()
    assert restarted.rows.reads == 0
    assert found(restarted, "dog") == ["pets.md", "walks.md"]
    assert restarted.rows.reads == 0  # the hits' texts are read for excerpts, not indexed
    assert restarted.stale() == []
    compost = Compost(tmp_path / "compost", index=StoreTextIndex(store))
    compost.refresh()
    assert compost.rows.reads == 0
    assert compost.search("dog", 10) == [CompostHit("tpl-walks", "Walk the dog early", 1)]


def test_the_watcher_s_invalidate_re_syncs_a_file_and_a_deleted_one_is_gone(
    store: Store, tmp_path: Path
) -> None:
    pets, food, walks = sorted(write_notes(tmp_path / "notes"), key=lambda p: p.name != "pets.md")
    substrate = Substrate([tmp_path / "notes"], index=StoreTextIndex(store))
    assert sorted(found(substrate, "lunch")) == ["food.md", "pets.md"]
    before = row_ids(store, SUBSTRATE)

    substrate.invalidate(pets)  # named but unchanged: read again, its hash keeps its row
    substrate.prepare_search()
    assert row_ids(store, SUBSTRATE) == before
    assert substrate.rows.reads == 4

    pets.write_text("# Pets\n\nThe dog naps all afternoon.\n")
    substrate.invalidate(pets)
    assert "pets.md" not in found(substrate, "lunch")
    assert found(substrate, "afternoon") == ["pets.md"]
    assert len(set(row_ids(store, SUBSTRATE)) - set(before)) == 1  # that file's row alone

    walks.unlink()
    substrate.invalidate(walks)
    assert found(substrate, "lake") == []
    assert store.read_sync(lambda tx: tx.text_index.coverage())[SUBSTRATE] == 2
    assert food in substrate.files() and walks not in substrate.files()


def test_a_read_only_index_answers_as_it_is_and_says_when_it_is_stale(
    store: Store, tmp_path: Path
) -> None:
    """The CLI with the daemon down: the rows the daemon wrote are ranked, nothing is
    written, and files changed since are named in one warning."""
    write_notes(tmp_path / "notes")
    compost_dir = tmp_path / "compost"
    compost_dir.mkdir()
    (compost_dir / "a.json").write_text(learnings("Walk the dog early", "Feed the cat"))
    Substrate([tmp_path / "notes"], index=StoreTextIndex(store)).prepare_search()
    Compost(compost_dir, index=StoreTextIndex(store)).refresh()
    kept = (row_ids(store, SUBSTRATE), row_ids(store, COMPOST))
    (tmp_path / "notes" / "new.md").write_text("The dog has a new bed.\n")
    (compost_dir / "a.json").write_text(learnings("Walk the dog late"))

    reader = Store(store.url)  # never started: the CLI's read-only store
    try:
        with structlog.testing.capture_logs() as logs:
            substrate = Substrate([tmp_path / "notes"], index=StoreTextIndex(reader))
            assert found(substrate, "dog") == ["pets.md", "walks.md"]  # not new.md
            compost = Compost(compost_dir, index=StoreTextIndex(reader))
            # The learning indexed is no longer in the file: it is left out.
            assert compost.search("dog", 10) == []
            assert compost.search("cat", 10) == []
            compost.search("dog", 10)
        assert substrate.rows.reads == 1  # stale() hashed the new file
        warned = [e for e in logs if e["log_level"] == "warning"]
        assert [(e["layer"], e["files"]) for e in warned] == [(SUBSTRATE, 1), (COMPOST, 1)]
        assert {e["event"] for e in warned} == {
            "the text index is not current: files changed since are searched as they were"
            " indexed (start the daemon, or run `cambium index rebuild`)"
        }
        assert substrate.stale() == [(str(tmp_path / "notes" / "new.md"), "not indexed")]
        assert compost.stale() == [(str(compost_dir / "a.json"), "changed since it was indexed")]
    finally:
        reader.close()
    assert (row_ids(store, SUBSTRATE), row_ids(store, COMPOST)) == kept  # nothing written


@pytest.mark.parametrize("where", ["store", "memory"])
def test_files_rank_as_the_in_memory_index_ranked_them(
    where: str, store: Store, tmp_path: Path
) -> None:
    """The index's candidates, scored with the layer's BM25, put the files in the order
    :class:`~daemon.search.text.Index` (which ranked them before) does."""
    corpus = {
        "garden.md": "Tomatoes in the garden. The garden needs water in July.\n",
        "kitchen.md": "Tomatoes and basil for the sauce.\nWater boils at noon.\n",
        "travel.md": "Trains to Lisbon in July. Pack water and a hat.\nLisbon again in May.\n",
        "health.md": "Drink water. Walk daily. Sleep early.\nNo sauce after dinner.\n",
        "books.md": "A book about Lisbon and its gardens.\n",
    }
    directory = tmp_path / "notes"
    directory.mkdir()
    old: Index[str] = Index()
    for name, body in sorted(corpus.items()):
        (directory / name).write_text(body)
        old.add(name, body)
    index = StoreTextIndex(store) if where == "store" else MemoryTextIndex()
    substrate = Substrate([directory], index=index)
    for query in ("water", "lisbon july", "garden tomatoes sauce", "sauce", "water in july"):
        assert found(substrate, query) == [match.key for match in old.search(query, 10)], query
