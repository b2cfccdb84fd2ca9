"""Hybrid recall with the real embedding model (all-MiniLM-L6-v2, int8 ONNX, from the
``semantic`` extra's packages; nothing is downloaded), through the real daemon: its worker
embeds in the background, recall ranks what is embedded and says how much is, the vectors
are stored rows keyed by content, and SIGTERM stops the daemon within seconds whatever the
worker is doing. Skipped, with the reason, when the extra is not installed;
test_fusion.py covers the fusion logic without it."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from semantic_model import DAILY, QUESTION, semantic_config

from daemon.store import Store
from daemon.testing import DaemonHome, running

__all__ = ["semantic_config"]  # the fixture, shared by the tests below


@pytest.fixture
def home(tmp_path: Path) -> DaemonHome:
    home = DaemonHome(tmp_path)
    (tmp_path / "memory" / "daily" / "2026-04-11.md").write_text(DAILY)
    (tmp_path / "memory" / "long-term" / "hobbies.md").write_text("# Hobbies\n\nCello lessons.\n")
    (tmp_path / "memory" / "long-term" / "food.md").write_text("# Food\n\nLentil soup.\n")
    assert home.cli("db", "upgrade").returncode == 0
    return home


def recall(home: DaemonHome, about: str, *more: str) -> dict[str, Any]:
    result = home.cli(
        "memory", "recall", about, "--layers", "daily,substrate", "--horizon", "all", *more
    )
    assert result.returncode == 0, result.stderr
    if "--json" not in more:
        return {"text": result.stdout}
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def asked(home: DaemonHome, about: str, **params: str) -> dict[str, Any]:
    found: dict[str, Any] = home.get("/v1/recall", about=about, horizon="all", **params).json()
    return found


def embedded(home: DaemonHome) -> dict[str, Any]:
    coverage: dict[str, Any] = home.get("/v1/health").json()["embedding"]
    return coverage


def wait_until_embedded(home: DaemonHome, at_least: int = 1) -> dict[str, Any]:
    """Until the worker has embedded everything it knows of (and at least ``at_least``)."""
    deadline = time.monotonic() + 180  # a bound for a busy machine, not a speed goal
    while True:
        coverage = embedded(home)
        if coverage["embedded"] == coverage["total"] >= at_least:
            return coverage
        assert time.monotonic() < deadline, f"never embedded: {coverage}\n{home.log_text()}"
        time.sleep(0.2)


def test_semantic_recall_finds_a_paraphrase_once_embedded_and_says_how_much_was(
    home: DaemonHome, semantic_config: str
) -> None:
    lexical = recall(home, QUESTION, "--json")
    assert lexical["daily"] == [] and lexical["substrate"] == []
    assert "semantic" not in lexical

    home.extra_config = semantic_config
    home.write_config()
    with running(home):
        first = asked(home, QUESTION, layers="daily")  # answered at once, embedded or not
        assert set(first["semantic"]) == {"embedded", "total"}
        coverage = wait_until_embedded(home, at_least=4 + 4)  # lines, substrate lines
        hybrid = asked(home, QUESTION, layers="daily,substrate")
        assert hybrid["semantic"] == {"embedded": coverage["total"], "total": coverage["total"]}
        # The violin line, perhaps with the line before it: a line's meaning is partly
        # that of its neighbours (daemon.search.fusion.line_meanings).
        best = hybrid["daily"][0]
        assert best["date"] == "2026-04-11"
        assert best["line_range"] in ([2, 2], [1, 2])
        assert "Anna: I've been practising my violin every evening" in str(best["excerpt"])
        assert [Path(str(hit["file"])).name for hit in hybrid["substrate"]] == ["hobbies.md"]
        assert hybrid["substrate"][0]["reason"] == "similar in meaning"
        # A question about nothing in memory finds nothing, rather than the nearest lines.
        nothing = asked(home, "quarterly tax filing deadline")
        assert [nothing[layer] for layer in ("daily", "substrate", "marks", "compost")] == [
            [],
            [],
            [],
            [],
        ]
        # Lexical matches still come first when there are any.
        assert asked(home, "soup", layers="daily")["daily"][0]["line_range"] == [1, 1]
        status = home.cli("status")
        assert status.returncode == 0, status.stderr
        assert f"{coverage['total']} of {coverage['total']} embedded (100%)" in status.stdout
    # The daemon down, the CLI reads the stored vectors (it embeds the question only); the
    # substrate's lines, which only the daemon embeds, are ranked by their words.
    shown = recall(home, QUESTION)["text"]
    assert "Anna: I've been practising my violin every evening" in shown
    assert "semantic: 4 of 8 embedded (50%); the rest ranked by words" in shown


def stored_ids(home: DaemonHome) -> dict[int, tuple[int, bytes]]:
    """part -> (id, hash) of the stored vectors of the day's lines."""
    store = Store(f"sqlite:///{home.root / 'cambium.db'}")
    try:
        return store.read_sync(lambda tx: tx.dense.at("daily", "2026-04-11", "live"))
    finally:
        store.close()


def test_vectors_are_stored_rows_and_a_new_line_embeds_only_what_changed(
    home: DaemonHome, semantic_config: str
) -> None:
    home.extra_config = semantic_config
    home.write_config()
    with running(home):
        wait_until_embedded(home, at_least=4)
        before = stored_ids(home)
        assert sorted(before) == [1, 2, 3, 4]
        with (home.root / "memory" / "daily" / "2026-04-11.md").open("a") as file:
            file.write("Anna: bought new strings for my fiddle\n")
        asked(home, "fiddle", layers="daily")  # the recall reads the file; the worker follows
        wait_until_embedded(home, at_least=9)
        after = stored_ids(home)
    # Lines 1-3 mean what they meant: their rows were kept as they were (a row written
    # again would have a new id). Line 4's window changed, so it means something else.
    assert sorted(after) == [1, 2, 3, 4, 5]
    assert [after[n] for n in (1, 2, 3)] == [before[n] for n in (1, 2, 3)]
    assert after[4][1] != before[4][1]


def test_a_semantic_config_without_its_model_is_refused_naming_the_key(
    home: DaemonHome,
) -> None:
    home.extra_config = (
        '[recall]\nsemantic = true\nmodel = "missing.onnx"\ntokenizer = "missing.json"\n'
    )
    home.write_config()
    result = home.cli("memory", "recall", QUESTION)
    assert result.returncode == 2
    assert "recall.model: no such file" in result.stderr


def test_the_daemon_embeds_in_the_background_what_changes_and_finds_marks_by_meaning(
    home: DaemonHome, semantic_config: str
) -> None:
    home.extra_config = semantic_config
    home.write_config()
    with running(home):
        wait_until_embedded(home, at_least=8)
        # No recall is asked for: the watcher's change alone gets the new line embedded.
        (home.root / "memory" / "long-term" / "garden.md").write_text("Tomatoes by the wall.\n")
        wait_until_embedded(home, at_least=9)
        found = home.get("/v1/recall", about="vegetable patch", layers="substrate").json()
        assert [Path(hit["file"]).name for hit in found["substrate"]][:1] == ["garden.md"]

        # A mark is found by what its observation means, not only by its words.
        observed = {
            "subject": "user.hobbies",
            "observation": "practises the violin every evening",
            "evidence": {"note": "said so in chat"},
        }
        emitted = home.cli(
            "emit", "memory.observation", "--payload", json.dumps(observed), "--source-id", "chat"
        )
        assert emitted.returncode == 0, emitted.stderr
        wait_until_embedded(home, at_least=10)
        marks = home.get("/v1/recall", about="musical instrument", layers="marks").json()["marks"]
        assert [mark["observation"] for mark in marks] == [observed["observation"]]


def test_a_daemon_whose_vectors_cannot_be_opened_serves_and_ranks_by_words(
    home: DaemonHome, semantic_config: str
) -> None:
    """The daemon opens its stored vectors before it serves. When that fails (here a
    symlink where the matrix belongs, which is refused, not followed), its log says so and
    it serves all the same, ranking by words, as when its worker fails later."""
    home.extra_config = semantic_config
    home.write_config()
    (home.root / "embeddings.i8").symlink_to(home.root / "elsewhere")
    with running(home):
        found = asked(home, "lentil", layers="substrate")
        assert [Path(hit["file"]).name for hit in found["substrate"]] == ["food.md"]
    assert "the stored vectors could not be opened" in home.log_text()
    assert not (home.root / "elsewhere").exists()


def test_sigterm_stops_the_daemon_within_seconds_while_it_embeds(
    home: DaemonHome, semantic_config: str
) -> None:
    """Long lines keep the model busy; SIGTERM interrupts it mid-batch, and what was stored
    is kept for the next start."""
    words = ["the", "quiet", "river", "ran", "past", "the", "old", "mill", "where", "we"]
    lines = [" ".join(words[(n + k) % len(words)] for k in range(60)) for n in range(400)]
    (home.root / "memory" / "daily" / "2026-04-12.md").write_text("\n".join(lines) + "\n")
    home.extra_config = semantic_config + "embed_batch = 8\n"
    home.write_config()
    home.start()
    deadline = time.monotonic() + 180
    while embedded(home)["embedded"] == 0:  # the worker is at work
        assert time.monotonic() < deadline, home.log_text()
        time.sleep(0.1)
    assert embedded(home)["embedded"] < embedded(home)["total"]
    stopped = time.monotonic()
    assert home.stop(signal.SIGTERM, timeout=30) == 0
    assert time.monotonic() - stopped <= 5.0, home.log_text()
    store = Store(f"sqlite:///{home.root / 'cambium.db'}")
    try:
        kept = store.read_sync(lambda tx: tx.dense.count())
    finally:
        store.close()
    assert kept > 0
    with running(home):
        # Health counts the vector file, which the worker brings in step with the store in
        # its first moments: until then it may say fewer than the store holds.
        deadline = time.monotonic() + 30
        while embedded(home)["embedded"] < kept:
            assert time.monotonic() < deadline, home.log_text()
            time.sleep(0.1)
