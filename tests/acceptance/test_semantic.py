"""Hybrid recall with the real embedding model (all-MiniLM-L6-v2, int8 ONNX, from the
``semantic`` extra's packages; nothing is downloaded). Skipped, with the reason, when the
extra is not installed; test_fusion.py covers the fusion logic without it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from semantic_model import DAILY, QUESTION, embedding, semantic

from daemon.search.fusion import line_meanings, said_of_speaker
from daemon.testing import DaemonHome, running


@pytest.fixture
def home(tmp_path: Path) -> DaemonHome:
    home = DaemonHome(tmp_path)
    (tmp_path / "memory" / "daily" / "2026-04-11.md").write_text(DAILY)
    (tmp_path / "memory" / "long-term" / "hobbies.md").write_text("# Hobbies\n\nCello lessons.\n")
    (tmp_path / "memory" / "long-term" / "food.md").write_text("# Food\n\nLentil soup.\n")
    assert home.cli("db", "upgrade").returncode == 0
    return home


def recall(home: DaemonHome, about: str) -> dict[str, list[dict[str, object]]]:
    result = home.cli(
        "memory", "recall", about, "--layers", "daily,substrate", "--horizon", "all", "--json"
    )
    assert result.returncode == 0, result.stderr
    found: dict[str, list[dict[str, object]]] = json.loads(result.stdout)
    return found


def semantic_on(home: DaemonHome) -> None:
    home.extra_config = "[recall]\nsemantic = true\n"
    home.write_config()


def test_semantic_recall_finds_a_paraphrase_the_lexical_recall_misses(home: DaemonHome) -> None:
    # The CLI asks the running daemon, which holds the model (the CLI never loads it).
    with running(home):
        lexical = recall(home, QUESTION)
        assert recall(home, "soup")["daily"][0]["line_range"] == [1, 1]
        home.stop()
    assert lexical["daily"] == []
    assert lexical["substrate"] == []

    semantic_on(home)
    with running(home):
        hybrid = recall(home, QUESTION)
        nothing = recall(home, "quarterly tax filing deadline")
        soup = recall(home, "soup")
    # The violin line, perhaps with the line before it: a line's meaning is partly that of
    # its neighbours (daemon.search.fusion.line_meanings).
    best = hybrid["daily"][0]
    assert best["date"] == "2026-04-11"
    assert best["line_range"] in ([2, 2], [1, 2])
    assert "Anna: I've been practising my violin every evening" in str(best["excerpt"])
    assert [Path(str(hit["file"])).name for hit in hybrid["substrate"]] == ["hobbies.md"]
    assert hybrid["substrate"][0]["reason"] == "similar in meaning"
    # A question about nothing in memory finds nothing, rather than the nearest lines.
    assert nothing == {"daily": [], "substrate": [], "marks": [], "compost": [], "summary": None}
    # Lexical matches still come first when there are any.
    assert soup["daily"][0]["line_range"] == [1, 1]


def test_embeddings_are_kept_beside_the_store_keyed_by_content(home: DaemonHome) -> None:
    semantic_on(home)
    # A daily line as said by its speaker, and with its neighbours; a substrate line as is.
    daily = [text for pair in line_meanings(DAILY.splitlines()) for text in pair]
    texts = [*daily, "# Hobbies", "Cello lessons.", "# Food", "Lentil soup."]
    assert "Anna: Anna has been practising Anna's violin every evening" in texts
    with running(home):
        recall(home, QUESTION)
        cache = semantic.EmbeddingCache(
            home.root / "embeddings.sqlite", embedding.DEFAULT_MODEL_ID, 384
        )
        assert len(cache.get_many(semantic.content_hash(text) for text in texts)) == len(texts)
        assert len(cache) == len(texts)  # queries are not stored
        # A new line is embedded, with its window and the changed window of the line
        # before it; the unchanged texts are not embedded again.
        with (home.root / "memory" / "daily" / "2026-04-11.md").open("a") as file:
            file.write("Anna: bought new strings for my fiddle\n")
        first = recall(home, QUESTION)["daily"][0]["line_range"]
        assert first[0] <= 2 <= first[1] or first[0] <= 5 <= first[1]
        assert len(cache) == len(texts) + 3


def test_a_semantic_config_without_its_model_is_refused_naming_the_key(
    home: DaemonHome,
) -> None:
    home.extra_config = (
        '[recall]\nsemantic = true\nmodel = "missing.onnx"\ntokenizer = "missing.json"\n'
    )
    home.write_config()
    result = home.cli("run")
    assert result.returncode == 2
    assert "recall.model: no such file" in result.stderr


def embedded(home: DaemonHome, text: str) -> bool:
    cache = semantic.EmbeddingCache(
        home.root / "embeddings.sqlite", embedding.DEFAULT_MODEL_ID, 384
    )
    try:
        return bool(cache.get_many([semantic.content_hash(text)]))
    finally:
        cache.close()


def wait_until_embedded(home: DaemonHome, text: str) -> None:
    deadline = time.monotonic() + 120  # a bound for a busy machine, not a speed goal
    while not embedded(home, text):
        assert time.monotonic() < deadline, f"{text!r} was never embedded"
        time.sleep(0.2)


def test_the_daemon_embeds_at_start_and_when_the_substrate_changes(home: DaemonHome) -> None:
    semantic_on(home)
    with running(home):
        wait_until_embedded(home, said_of_speaker(DAILY.splitlines()[1]))
        wait_until_embedded(home, "Cello lessons.")
        # No recall is asked for: the watcher's change alone gets the new line embedded.
        (home.root / "memory" / "long-term" / "garden.md").write_text("Tomatoes by the wall.\n")
        wait_until_embedded(home, "Tomatoes by the wall.")
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
        marks = home.get("/v1/recall", about="musical instrument", layers="marks").json()["marks"]
        assert [mark["observation"] for mark in marks] == [observed["observation"]]
