"""The compost: learnings of retired agents, matched, grouped across agents, and ranked."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

import daemon.files.compost as compost_module
from daemon.files.compost import Compost, CompostHit
from daemon.search.index import TextIndex
from daemon.store import Store, StoreTextIndex


class Recorder:
    """Stands in for the module's logger, keeping what was logged."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))


def record(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "cmp-1",
        "agent_id": "a-1",
        "template_id": "tpl-morning-brief",
        "success_rate": 0.9,
        "failure_patterns": [],
        "successful_strategies": ["Using the early morning slot for deep work"],
        "template_improvements": [],
        "routing_hints": [],
        "composted_at": "2026-04-01T00:00:00Z",
        "reason": "end of lifetime",
    }
    return {**base, **overrides}


def write(directory: Path, name: str, content: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "compost"


@pytest.fixture
def index(store: Store) -> TextIndex:
    """The store's text index (SQLite, and PostgreSQL when configured)."""
    return StoreTextIndex(store)


def test_improvements_and_failure_patterns_match_a_subject(
    directory: Path, index: TextIndex
) -> None:
    write(
        directory,
        "b.json",
        record(id="cmp-b", template_improvements=["Add vegetable timing notes"]),
    )
    write(
        directory,
        "c.json",
        record(
            id="cmp-c",
            agent_id="a-2",
            failure_patterns=[
                {"pattern": "confused about vegetable timing", "frequency": 3, "context": {}}
            ],
        ),
    )
    hits = Compost(directory, index=index).search("user.food.vegetables", 10)
    assert sorted(hits, key=lambda hit: hit.learning) == [
        CompostHit("tpl-morning-brief", "Add vegetable timing notes", 1),
        CompostHit("tpl-morning-brief", "confused about vegetable timing", 1),
    ]


def test_the_same_learning_from_two_agents_is_one_hit_counting_both(
    directory: Path, index: TextIndex
) -> None:
    strategy = ["Vegetable timing rule"]
    write(
        directory,
        "retired.json",
        [
            record(id="cmp-x", agent_id="a-1", successful_strategies=strategy),
            record(id="cmp-y", agent_id="a-2", successful_strategies=strategy),
            record(id="cmp-z", agent_id="a-2", successful_strategies=strategy),
        ],
    )
    write(
        directory,
        "other.json",
        record(id="cmp-o", template_id="tpl-chef", successful_strategies=strategy),
    )
    hits = Compost(directory, index=index).search("vegetables", 10)
    assert hits == [
        CompostHit("tpl-morning-brief", "Vegetable timing rule", 2),
        CompostHit("tpl-chef", "Vegetable timing rule", 1),
    ]


def test_learnings_are_ranked_and_bounded_by_the_limit(directory: Path, index: TextIndex) -> None:
    write(
        directory,
        "r.json",
        record(
            successful_strategies=[
                "Check the weather before the morning walk",
                "Plan the morning walk route the evening before",
                "Keep the walk short when it rains",
                "Prefer quiet routes",
            ]
        ),
    )
    compost = Compost(directory, index=index)
    hits = compost.search("rain walk", 10)
    assert hits[0].learning == "Keep the walk short when it rains"
    assert len(hits) == 3
    assert len(compost.search("rain walk", 2)) == 2
    assert compost.search("walking", 10)[0].learning.startswith(("Check", "Plan", "Keep"))
    assert compost.search("walkway", 10) == []


def test_a_malformed_file_is_logged_and_skipped_and_the_others_still_count(
    directory: Path, monkeypatch: pytest.MonkeyPatch, index: TextIndex
) -> None:
    recorder = Recorder()
    monkeypatch.setattr(compost_module, "log", recorder)
    write(directory, "good.json", record(template_improvements=["Batch errands by area"]))
    bad = {
        "broken.json": "{not json",
        "shape.json": ["just", "strings"],
        "missing.json": {k: v for k, v in record().items() if k != "agent_id"},
        "types.json": record(success_rate="high", template_improvements=["Batch errands too"]),
    }
    for name, content in bad.items():
        write(directory, name, content)
    write(directory, "notes.txt", "errands")
    compost = Compost(directory, index=index)
    assert compost.search("errands", 10) == [
        CompostHit("tpl-morning-brief", "Batch errands by area", 1)
    ]
    logged = sorted(Path(fields["path"]).name for _, fields in recorder.events)
    assert logged == sorted(bad)
    compost.search("errands", 10)
    assert len(recorder.events) == len(bad), "an unchanged file is not parsed (or logged) again"


def test_the_template_allow_list_restricts_what_is_read(directory: Path, index: TextIndex) -> None:
    write(directory, "a.json", record(template_id="tpl-a", template_improvements=["Nap timing"]))
    write(directory, "b.json", record(template_id="tpl-b", template_improvements=["Nap length"]))
    assert [
        hit.template_id for hit in Compost(directory, ["tpl-b"], index=index).search("nap", 10)
    ] == ["tpl-b"]
    assert len(Compost(directory, index=index).search("nap", 10)) == 2
    assert Compost(directory, [], index=index).search("nap", 10) == []


def test_changed_and_deleted_files_are_seen(directory: Path, index: TextIndex) -> None:
    path = write(directory, "a.json", record(template_improvements=["Nap timing"]))
    compost = Compost(directory, index=index)
    assert compost.search("nap", 10)
    write(directory, "a.json", record(template_improvements=["Shorter naps after lunch"]))
    assert [hit.learning for hit in compost.search("nap", 10)] == ["Shorter naps after lunch"]
    path.unlink()
    assert compost.search("nap", 10) == []


def test_a_missing_directory_has_no_learnings(tmp_path: Path, index: TextIndex) -> None:
    assert Compost(tmp_path / "nowhere", index=index).search("anything", 10) == []


def test_a_deeply_nested_file_and_a_fifo_are_skipped_with_one_warning_each(
    directory: Path, monkeypatch: pytest.MonkeyPatch, index: TextIndex
) -> None:
    """Issue 11, findings 10 and 11: a FIFO hung every recall; a 100,000-deep JSON file
    (RecursionError) failed every recall."""
    recorder = Recorder()
    monkeypatch.setattr(compost_module, "log", recorder)
    write(directory, "good.json", record(template_improvements=["Batch errands by area"]))
    write(directory, "deep.json", "[" * 100_000 + "]" * 100_000)
    os.mkfifo(directory / "pipe.json")
    compost = Compost(directory, index=index)
    found: list[list[CompostHit]] = []
    searching = threading.Thread(target=lambda: found.append(compost.search("errands", 10)))
    searching.start()
    searching.join(30)  # a bound on a hang, not a timing check
    assert not searching.is_alive(), "the FIFO blocked the search"
    assert found == [[CompostHit("tpl-morning-brief", "Batch errands by area", 1)]]
    compost.search("errands", 10)
    assert sorted(Path(fields["path"]).name for _, fields in recorder.events) == [
        "deep.json",
        "pipe.json",
    ]
