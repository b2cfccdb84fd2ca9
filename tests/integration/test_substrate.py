"""The substrate: the user's markdown files, found, cached, searched, and never written."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

import daemon.files.substrate as substrate_module
from daemon.files.substrate import Substrate, SubstrateHit
from daemon.store import Store, StoreTextIndex


class Recorder:
    """Stands in for the module's logger, keeping what was logged."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A directory entry with two markdown files (and a file that is not markdown), and a
    single-file entry beside it."""
    long_term = tmp_path / "long-term"
    long_term.mkdir()
    (long_term / "workflow.md").write_text(
        "# Workflow\n\nI prefer deep work before lunch.\nMeetings are batched on Tuesdays.\n"
    )
    (long_term / "identity.md").write_text(
        "# Identity\n\nI am Joshua.\nI protect my afternoons for focus work.\nI build Cambium.\n"
    )
    (long_term / "scratch.txt").write_text("focus focus focus\n")
    (tmp_path / "SOUL.md").write_text("# Soul\n\nBe kind, be brief.\n")
    return tmp_path


@pytest.fixture
def substrate(home: Path, store: Store) -> Substrate:
    """Ranked from the store's text index (SQLite, and PostgreSQL when configured)."""
    return Substrate([home / "long-term", home / "SOUL.md"], index=StoreTextIndex(store))


def test_directory_and_single_file_entries_yield_every_file_as_an_absolute_path(
    home: Path, substrate: Substrate
) -> None:
    assert substrate.files() == [
        home / "long-term" / "identity.md",
        home / "long-term" / "workflow.md",
        home / "SOUL.md",
    ]
    assert all(path.is_absolute() for path in substrate.files())
    assert substrate.read(home / "SOUL.md") == "# Soul\n\nBe kind, be brief.\n"
    assert set(substrate.contents()) == set(substrate.files())


def test_a_missing_entry_is_logged_and_skipped(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder()
    monkeypatch.setattr(substrate_module, "log", recorder)
    substrate = Substrate([home / "personal-context", home / "USER.md", home / "SOUL.md"])
    assert substrate.files() == [home / "SOUL.md"]
    assert [fields["entry"] for _, fields in recorder.events] == [
        str(home / "personal-context"),
        str(home / "USER.md"),
    ]


def test_relative_entries_are_refused() -> None:
    with pytest.raises(ValueError, match="absolute"):
        Substrate([Path("memory/long-term")])


def test_other_paths_cannot_be_read_through_the_substrate(home: Path, substrate: Substrate) -> None:
    with pytest.raises(ValueError, match="not a substrate file"):
        substrate.read(home / "long-term" / "scratch.txt")


def test_search_finds_the_best_line_with_its_context_and_says_why(
    home: Path, substrate: Substrate
) -> None:
    hits = substrate.search("focus", 10)
    assert hits == [
        SubstrateHit(
            file=str(home / "long-term" / "identity.md"),
            excerpt="I am Joshua.\nI protect my afternoons for focus work.\nI build Cambium.",
            reason="matched tokens: focus",
        )
    ]


def test_a_subject_path_is_searched_by_its_segments(home: Path, substrate: Substrate) -> None:
    hits = substrate.search("joshua.workflow.meetings", 10)
    assert [Path(hit.file).name for hit in hits] == ["workflow.md", "identity.md"]
    assert hits[0].reason == "matched tokens: workflow, meetings"
    assert hits[0].excerpt == "# Workflow"  # the best line; the next one is blank


def test_search_ranks_files_and_respects_the_limit(substrate: Substrate) -> None:
    hits = substrate.search("work", 10)
    assert len(hits) == 2
    assert len(substrate.search("work", 1)) == 1
    assert substrate.search("the", 10) == []  # nothing but a stopword
    assert substrate.search("patience", 10) == []


def test_an_edit_is_seen_once_the_file_is_invalidated(home: Path, substrate: Substrate) -> None:
    workflow = home / "long-term" / "workflow.md"
    assert substrate.search("lunch", 10)
    workflow.write_text("# Workflow\n\nAll-day deep work.\n")
    assert substrate.search("lunch", 10), "contents are cached until invalidated"
    substrate.invalidate(workflow)
    assert substrate.search("lunch", 10) == []
    assert substrate.read(workflow) == "# Workflow\n\nAll-day deep work.\n"


def test_a_save_by_rename_is_seen_once_invalidated(home: Path, substrate: Substrate) -> None:
    soul = home / "SOUL.md"
    assert substrate.search("brief", 10)
    temporary = home / ".SOUL.md.swp"
    temporary.write_text("# Soul\n\nBe curious.\n")
    os.replace(temporary, soul)
    substrate.invalidate(soul)
    assert substrate.search("brief", 10) == []
    assert [hit.file for hit in substrate.search("curious", 10)] == [str(soul)]


def test_created_and_deleted_files_are_seen_once_invalidated(
    home: Path, substrate: Substrate
) -> None:
    lessons = home / "long-term" / "lessons.md"
    lessons.write_text("Never deploy on Fridays.\n")
    substrate.invalidate(lessons)
    assert lessons in substrate.files()
    assert substrate.search("deploy", 10)[0].file == str(lessons)

    lessons.unlink()
    (home / "SOUL.md").unlink()
    substrate.invalidate()
    assert substrate.files() == [
        home / "long-term" / "identity.md",
        home / "long-term" / "workflow.md",
    ]
    assert substrate.search("deploy", 10) == []


def test_substrate_files_are_never_written(home: Path, substrate: Substrate) -> None:
    def snapshot() -> dict[Path, tuple[bytes, int]]:
        return {
            path: (path.read_bytes(), path.stat().st_mtime_ns)
            for path in sorted(home.rglob("*"))
            if path.is_file()
        }

    before = snapshot()
    substrate.files()
    substrate.contents()
    substrate.read(home / "SOUL.md")
    substrate.search("focus work lunch", 10)
    substrate.referenced(["long-term/identity.md", "SOUL.md"], "m1")
    substrate.watch_roots()
    substrate.is_substrate_path(home / "SOUL.md")
    substrate.invalidate(home / "SOUL.md")
    substrate.invalidate()
    substrate.search("soul", 10)
    assert snapshot() == before


def test_referenced_files_match_by_path_suffix_on_a_slash_boundary(
    home: Path, substrate: Substrate
) -> None:
    (home / "long-term" / "lessons.md").write_text("# Lessons\n\nShip small.\n")
    (home / "long-term" / "mylessons.md").write_text("# My lessons\n")
    substrate.invalidate()

    hits = substrate.referenced(["long-term/lessons.md"], "m1")
    assert hits == [
        SubstrateHit(
            file=str(home / "long-term" / "lessons.md"),
            excerpt="# Lessons\n\nShip small.",
            reason="referenced by mark m1",
        )
    ]
    assert [h.file for h in substrate.referenced(["lessons.md"], "m1")] == [
        str(home / "long-term" / "lessons.md")
    ]
    assert substrate.referenced(["ssons.md", "term/lessons.md", "nope.md"], "m1") == []


def test_the_watcher_watches_the_entries_that_exist(home: Path, substrate: Substrate) -> None:
    assert substrate.watch_roots() == [home / "long-term", home / "SOUL.md"]
    missing = Substrate([home / "later", home / "USER.md", home / "long-term"])
    assert missing.watch_roots() == [home / "long-term"]


def test_only_substrate_paths_pass_the_watcher_filter(home: Path, substrate: Substrate) -> None:
    assert substrate.is_substrate_path(home / "long-term" / "new.md")
    assert substrate.is_substrate_path(home / "SOUL.md")
    assert not substrate.is_substrate_path(home / "long-term" / "scratch.txt")
    assert not substrate.is_substrate_path(home / "long-term" / "sub" / "deep.md")
    assert not substrate.is_substrate_path(home / "OTHER.md")
    assert not substrate.is_substrate_path(home / ".SOUL.md.swp")


def test_searches_from_threads_survive_concurrent_invalidation(
    home: Path, substrate: Substrate
) -> None:
    errors: list[BaseException] = []
    done = threading.Event()

    def search() -> None:
        try:
            while not done.is_set():
                assert substrate.search("focus", 10)
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=search) for _ in range(3)]
    for reader in readers:
        reader.start()
    for _ in range(300):
        substrate.invalidate(home / "long-term" / "identity.md")
        substrate.invalidate()
    done.set()
    for reader in readers:
        reader.join()
    assert errors == []


def test_a_fifo_among_the_substrate_files_is_skipped_not_waited_for(home: Path) -> None:
    """Issue 11, finding 10, for the substrate: as a directory's child and as an entry."""
    os.mkfifo(home / "long-term" / "pipe.md")
    os.mkfifo(home / "USER.md")
    substrate = Substrate([home / "long-term", home / "SOUL.md", home / "USER.md"])
    found: list[list[SubstrateHit]] = []
    searching = threading.Thread(target=lambda: found.append(substrate.search("kind", 10)))
    searching.start()
    searching.join(30)  # a bound on a hang, not a timing check
    assert not searching.is_alive(), "the FIFO blocked the search"
    assert [Path(hit.file).name for hit in found[0]] == ["SOUL.md"]
    assert home / "USER.md" not in substrate.files()
