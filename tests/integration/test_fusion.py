"""Hybrid ranking without the real model: reciprocal-rank fusion, the substrate's dense
index and its embedding cache, and the daily and substrate searches fusing a dense ranking
(the daily lines' from their stored vectors, embedded by the worker), driven by a
deterministic embedder behind the same interface as the ONNX one.

The real model's tests are in test_semantic.py (they need the ``semantic`` extra)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import date
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

from daemon.files.daily import DailyLog
from daemon.files.substrate import Substrate
from daemon.search.fusion import line_meanings, ranking, reciprocal_rank_fusion, said_of_speaker
from daemon.store import Store, StoreTextIndex

if TYPE_CHECKING:
    from daemon.search import embedding as embedding_module
    from daemon.search import semantic as semantic_module
    from daemon.services.embedding_worker import EmbeddingWorker
    from daemon.services.semantic_recall import SemanticRecall

DAY = date(2026, 4, 11)

# The deterministic embedder knows a few meanings: words of one group share a direction.
MEANINGS = {
    "music": ("violin", "instrument", "practising", "cello", "play", "concert"),
    "food": ("vegetables", "cook", "dinner", "recipe", "meal"),
    "sleep": ("tired", "bed", "nap", "rest", "sleep"),
}


class MeaningEmbedder:
    """A vector per meaning group (and one per unknown word), summed and normalised: texts
    that share a meaning are similar even with no word in common."""

    model_id = "meaning-test"
    dimension = 256

    def __init__(self) -> None:
        self.embedded: list[str] = []  # every text it was asked for, in order

    def interrupt(self) -> None:
        pass  # a batch here takes no time

    def foreground(self) -> AbstractContextManager[None]:
        return nullcontext()  # nor does it hold a core

    def embed(
        self, texts: Sequence[str], *, interruptible: bool = False
    ) -> embedding_module.Vectors:
        import numpy as np

        from daemon.search.embedding import normalise

        self.embedded.extend(texts)
        rows = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace("?", " ").replace(".", " ").split():
                group = next((g for g, words in MEANINGS.items() if word in words), word)
                digest = hashlib.sha256(group.encode()).digest()
                rows[row, int.from_bytes(digest[:4], "big") % (self.dimension - 1)] += 1.0
        rows[:, -1] += 0.01  # no zero vectors
        return normalise(rows)


@pytest.fixture
def semantic() -> ModuleType:
    """The dense index module; the tests that need it skip without the extra."""
    pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")
    return pytest.importorskip(
        "daemon.search.semantic", reason="needs pip install 'cambium-memory[semantic]'"
    )


@pytest.fixture
def embedder() -> MeaningEmbedder:
    return MeaningEmbedder()


@pytest.fixture
def shared(
    semantic: ModuleType, embedder: MeaningEmbedder, tmp_path: Path
) -> semantic_module.Semantic:
    cache = semantic.EmbeddingCache(tmp_path / "embeddings.sqlite", "meaning-test", 256)
    return semantic.Semantic.create(embedder, cache, min_similarity=0.2)


def stored_daily(
    directory: Path, store: Store, shared: semantic_module.Semantic, tmp_path: Path
) -> tuple[DailyLog, EmbeddingWorker]:
    """A daily log ranking its lines' stored vectors, and the worker that embeds them."""
    from daemon.services.dense_store import StoredLines, StoredVectors
    from daemon.services.embedding_worker import EmbeddingWorker
    from daemon.services.mark_search import MarkSearch

    model, dimension = shared.embedder.model_id, shared.embedder.dimension
    vectors = StoredVectors(store, tmp_path / "vectors", model, dimension, writable=True)
    daily = DailyLog(directory, StoredLines(vectors, shared), index=StoreTextIndex(store))
    worker = EmbeddingWorker(vectors, shared, daily, MarkSearch(), batch=4)
    vectors.prepare(worker.stopped)
    return daily, worker


def stored_parts(store: Store, tmp_path: Path, batch: int = 8) -> SemanticRecall:
    """Hybrid recall's parts over ``store``, with the deterministic embedder and the
    vector file in ``tmp_path``, its vectors prepared (as the daemon's worker starts)."""
    from daemon.search.semantic import DenseIndex, Semantic
    from daemon.services.dense_store import StoredLines, StoredMarks, StoredVectors
    from daemon.services.semantic_recall import SemanticRecall

    shared = Semantic.create(MeaningEmbedder(), None, min_similarity=0.2)
    vectors = StoredVectors(store, tmp_path / "vectors", "meaning-test", 256, writable=True)
    vectors.prepare(lambda: False)
    return SemanticRecall(
        shared,
        vectors,
        DenseIndex(shared),
        StoredLines(vectors, shared),
        StoredMarks(vectors, shared),
        batch,
    )


def test_fusion_rewards_documents_both_rankings_place_high() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], k=10)
    assert ranking(fused, str) == ["a", "c", "b", "d"]
    assert fused["a"] == pytest.approx(1 / 11 + 1 / 12)


def test_fusion_weights_scale_a_ranking() -> None:
    fused = reciprocal_rank_fusion([["a"], ["b"]], weights=(1.0, 0.5), k=10)
    assert ranking(fused, str) == ["a", "b"]
    with pytest.raises(ValueError, match="one weight per ranking"):
        reciprocal_rank_fusion([["a"], ["b"]], weights=(1.0,))


def test_a_speakers_first_person_is_embedded_in_their_name_with_the_lines_around() -> None:
    assert said_of_speaker("Anna: I'm learning my violin, it calms me") == (
        "Anna: Anna is learning Anna's violin, it calms Anna"
    )
    assert said_of_speaker("bought bread, I think") == "bought bread, I think"  # no speaker
    assert line_meanings(["Ben: what do you play?", "Anna: I play the cello", "Ben: nice"]) == [
        ("Ben: what do you play?", "Ben: what do you play?\nAnna: Anna play the cello"),
        (
            "Anna: Anna play the cello",
            "Ben: what do you play?\nAnna: Anna play the cello\nBen: nice",
        ),
        ("Ben: nice", "Anna: Anna play the cello\nBen: nice"),
    ]


def test_a_question_naming_a_day_finds_that_days_lines(tmp_path: Path) -> None:
    (tmp_path / "2023-06-03.md").write_text("Ben: joined the dog shelter as a volunteer\n")
    (tmp_path / "2023-06-10.md").write_text("Anna: pottery is a new activity for me\n")
    daily = DailyLog(tmp_path)
    question = "What new activity did Anna take up, as mentioned on {}?"
    assert [hit.date for hit in daily.search(question.format("a day"), since=None, limit=2)] == [
        "2023-06-10"
    ]
    for day in ("3 June, 2023", "June 3rd, 2023", "2023-06-03"):
        found = daily.search(question.format(day), since=None, limit=2)
        assert "2023-06-03" in [hit.date for hit in found], day
    # The horizon still holds: a named day before it is not searched; the horizon's own is.
    late = daily.search(question.format("3 June, 2023"), since=date(2023, 6, 4), limit=2)
    assert [hit.date for hit in late] == ["2023-06-10"]
    edge = daily.search(question.format("3 June, 2023"), since=date(2023, 6, 3), limit=2)
    assert "2023-06-03" in [hit.date for hit in edge]
    # A day that cannot be is passed over, not the days named after it; an archived day's
    # lines are found as well as a live one's.
    daily.archive(date(2023, 6, 3))
    for days in ("31 June, 2023 or 3 June, 2023", "2023-06-31 or 2023-06-03"):
        found = daily.search(question.format(days), since=None, limit=2)
        assert ("2023-06-03", "Ben: joined the dog shelter as a volunteer") in [
            (hit.date, hit.excerpt) for hit in found
        ], days


def test_a_question_naming_a_speaker_puts_what_they_said_first(tmp_path: Path) -> None:
    (tmp_path / f"{DAY}.md").write_text(
        "Ben: Anna loves painting, painting every weekend with Anna\n"
        "filler\n"
        "Anna: painting calms me down after work\n"
    )
    daily = DailyLog(tmp_path)
    ranked = [hit.line_range for hit in daily.search("painting", since=None, limit=2)]
    assert ranked == [(1, 1), (3, 3)]  # by words alone, Ben's line says more
    asked = daily.search("What does anna say about painting?", since=None, limit=2)
    assert [hit.line_range for hit in asked] == [(3, 3), (1, 1)]


def test_ranking_breaks_ties_by_the_given_order() -> None:
    assert ranking({"x": 1.0, "y": 2.0, "z": 1.0}, lambda key: -ord(key)) == ["y", "z", "x"]


class MeaningRanker:
    """A pure-Python dense ranker (no numpy) over a day's lines: similarity is the share of
    meaning groups that a line (and its window) and the query have in common. Lets the
    layers' fusion run without the extra."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.texts = {
            (DAY, False, number): [self.meanings(text) for text in meaning]
            for number, meaning in enumerate(line_meanings(lines), start=1)
        }

    @staticmethod
    def meanings(text: str) -> frozenset[str]:
        words = set(text.lower().replace("?", " ").split())
        return frozenset(group for group, members in MEANINGS.items() if words & set(members))

    def nearest(
        self, query: str, limit: int, *, since: date | None = None, scope: str | None = None
    ) -> dict[Any, float]:
        wanted = self.meanings(query)
        similar = {  # the mean over a document's texts, as the stored vectors have it
            key: sum(len(wanted & one) / len(wanted | one) for one in found) / len(found)
            for key, found in self.texts.items()
            if any(wanted & one for one in found) and (since is None or key[0] >= since)
        }
        return dict(sorted(similar.items(), key=lambda item: -item[1])[:limit])


def test_the_daily_search_fuses_lexical_and_dense_rankings_without_the_extra(
    tmp_path: Path,
) -> None:
    lines = [
        "Anna: soup for dinner",
        "filler one",
        "Anna: practising the violin",
        "filler two",
        "Anna: a concert with Ben",
    ]
    (tmp_path / f"{DAY}.md").write_text("\n".join(lines) + "\n")
    lexical = DailyLog(tmp_path).search("Anna instrument", since=None, limit=3)
    assert [hit.line_range for hit in lexical] == [(1, 1), (3, 3), (5, 5)]  # name only
    hybrid = DailyLog(tmp_path, MeaningRanker(lines)).search("Anna instrument", since=None, limit=2)
    # Lines that match the name and the meaning come before the one matching the name only.
    assert sorted(hit.line_range for hit in hybrid) == [(3, 3), (5, 5)]


class NothingEmbedded:
    """A dense ranker before the worker has embedded anything in the horizon."""

    def nearest(
        self, query: str, limit: int, *, since: date | None = None, scope: str | None = None
    ) -> dict[Any, float]:
        return {}


@pytest.mark.parametrize(
    "query", ["violin", "what does Anna say about the violin", "violin on 2026-04-12"]
)
def test_a_dense_ranker_with_nothing_embedded_leaves_the_lexical_order_as_it_is(
    tmp_path: Path, query: str
) -> None:
    said = [f"{name}: the violin, {n}" for n in range(4) for name in ("Anna", "Ben")]
    lines = [line for one in said for line in (one, "filler", "filler")]  # hits apart
    (tmp_path / f"{DAY}.md").write_text("\n".join(lines) + "\n")  # equal scores: ties
    lexical = DailyLog(tmp_path).search(query, since=None, limit=12)
    hybrid = DailyLog(tmp_path, NothingEmbedded()).search(query, since=None, limit=12)
    assert [hit.line_range for hit in hybrid] == [hit.line_range for hit in lexical]
    assert len(lexical) > 1


def test_dense_index_ranks_by_meaning_once_embedded_and_forgets_removed_documents(
    semantic: ModuleType,
    shared: semantic_module.Semantic,
) -> None:
    index: semantic_module.DenseIndex[int] = semantic.DenseIndex(shared)
    index.add(1, ["cook dinner"])
    index.add(2, ["practising violin"])
    index.add(3, ["a long nap"])
    index.add(4, ["a meal"])
    assert index.nearest("which instrument", 3) == {}  # nothing embedded: a search never waits
    assert (len(index), index.pending) == (0, 4)
    assert index.flush(3) == 3
    assert (len(index), index.pending) == (3, 1)
    index.flush()
    assert list(index.nearest("which instrument", 3)) == [2]  # nothing else is about music
    index.remove(2)  # the last row moves into its place
    assert index.nearest("which instrument", 3) == {}
    assert list(index.nearest("recipe", 1)) in ([1], [4])
    assert sorted(index.nearest("recipe", 3)) == [1, 4]
    assert list(index.nearest("sleep", 3)) == [3]


def test_a_document_changed_while_it_is_embedded_is_not_brought_back(
    semantic: ModuleType, shared: semantic_module.Semantic
) -> None:
    index: semantic_module.DenseIndex[int] = semantic.DenseIndex(shared)
    index.add(1, ["cook dinner"])
    original = shared.embed_texts

    def meanwhile(texts: Sequence[str], *, interruptible: bool = False) -> Any:
        index.remove(1)  # the file changed while the model ran
        return original(texts, interruptible=interruptible)

    shared.embed_texts = meanwhile  # type: ignore[method-assign]
    index.flush()
    assert (len(index), index.pending) == (0, 0)


def test_each_text_is_embedded_once_and_kept_across_restarts(
    semantic: ModuleType,
    embedder: MeaningEmbedder,
    shared: semantic_module.Semantic,
    tmp_path: Path,
) -> None:
    index: semantic_module.DenseIndex[int] = semantic.DenseIndex(shared)
    for key in range(4):
        index.add(key, ["the same line"])
    index.add(9, ["another line"])
    index.flush()
    assert sorted(embedder.embedded) == ["another line", "the same line"]
    index.add(10, ["the same line"])  # the cache has it
    index.flush()
    assert len(embedder.embedded) == 2

    fresh = MeaningEmbedder()  # a restarted daemon, same cache file
    cache = semantic.EmbeddingCache(tmp_path / "embeddings.sqlite", "meaning-test", 256)
    reopened: semantic_module.DenseIndex[int] = semantic.DenseIndex(
        semantic.Semantic.create(fresh, cache)
    )
    reopened.add(1, ["another line"])
    reopened.add(2, ["a new line"])
    reopened.flush()
    assert list(reopened.nearest("a new line", 1)) == [2]
    assert fresh.embedded == ["a new line", "a new line"]  # the line, then the query


def test_a_document_of_several_texts_is_their_mean(
    semantic: ModuleType, shared: semantic_module.Semantic
) -> None:
    index: semantic_module.DenseIndex[str] = semantic.DenseIndex(shared)
    index.add("half", ["practising violin", "soup for dinner"])
    index.add("whole", ["cello concert", "violin"])
    index.add("none", ["a long nap"])
    index.flush()
    similar = index.nearest("which instrument", 3)
    assert list(similar) == ["whole", "half"]
    assert similar["half"] == pytest.approx(similar["whole"] / 2, rel=0.2)


def test_the_cache_keeps_models_apart(semantic: ModuleType, tmp_path: Path) -> None:
    import numpy as np

    path = tmp_path / "embeddings.sqlite"
    first = semantic.EmbeddingCache(path, "model-a", 2)
    first.put_many([(semantic.content_hash("x"), np.array([1.0, 0.0], dtype=np.float32))])
    assert len(first) == 1
    assert semantic.EmbeddingCache(path, "model-b", 2).get_many([semantic.content_hash("x")]) == {}


def test_daily_hybrid_search_finds_a_paraphrase_once_the_worker_embedded_it(
    semantic: ModuleType, shared: semantic_module.Semantic, store: Store, tmp_path: Path
) -> None:
    directory = tmp_path / "daily"
    directory.mkdir()
    (directory / f"{DAY}.md").write_text(
        "Anna: we had soup for dinner\n"
        "Anna: I've been practising my violin every evening\n"
        "Ben: the weather was grey all week\n"
    )
    question = "Which instrument does she study?"
    daily, worker = stored_daily(directory, store, shared, tmp_path)
    assert daily.search(question, since=None, limit=1) == []  # not embedded yet: lexical
    assert worker.coverage().embedded == 0
    assert worker.run_once()
    found = daily.search(question, since=None, limit=1)
    assert [(hit.date, hit.line_range) for hit in found] == [(DAY.isoformat(), (2, 2))]
    covered = worker.coverage()
    assert (covered.embedded, covered.total) == (3, 3)
    assert not worker.run_once()  # nothing left to do


def test_daily_hybrid_search_embeds_lines_appended_later_and_honours_the_horizon(
    semantic: ModuleType,
    embedder: MeaningEmbedder,
    shared: semantic_module.Semantic,
    store: Store,
    tmp_path: Path,
) -> None:
    daily, worker = stored_daily(tmp_path / "daily", store, shared, tmp_path)
    daily.append(DAY, "slept badly, so tired")
    worker.run_once()
    assert daily.search("cello", since=None, limit=5) == []
    daily.append(DAY, "went to a concert")
    worker.run_once()
    assert [hit.excerpt for hit in daily.search("cello", since=None, limit=1)] == [
        "went to a concert"
    ]
    embedded = len(embedder.embedded)
    daily.archive(DAY)
    worker.run_once()
    assert daily.search("cello", since=date(2026, 4, 12), limit=5) == []
    assert len(daily.search("cello", since=DAY, limit=1)) == 1
    # The archive's lines kept their vectors (found by hash): nothing was embedded again,
    # and the live file's vectors are gone with it.
    assert len(embedder.embedded) == embedded
    assert store.read_sync(lambda tx: tx.dense.fingerprints("daily")).keys() == {
        (DAY.isoformat(), "archived")
    }
    assert worker.coverage().embedded == 2


def test_substrate_hybrid_search_ranks_a_file_found_by_meaning(
    semantic: ModuleType, shared: semantic_module.Semantic, tmp_path: Path
) -> None:
    (tmp_path / "hobbies.md").write_text("# Hobbies\n\nViolin on Sundays.\n")
    (tmp_path / "kitchen.md").write_text("# Kitchen\n\nA recipe for soup.\n")
    lexical = Substrate([tmp_path]).search("musical instrument", 5)
    assert lexical == []
    dense = semantic.DenseIndex(shared)
    hybrid = Substrate([tmp_path], dense)
    assert hybrid.search("musical instrument", 1) == []  # read, not embedded yet
    dense.flush()
    hits = hybrid.search("musical instrument", 1)
    assert [(Path(hit.file).name, hit.excerpt, hit.reason) for hit in hits] == [
        ("hobbies.md", "Violin on Sundays.", "similar in meaning")
    ]
    both = hybrid.search("soup recipe", 2)
    assert both[0].reason == "matched tokens: soup, recipe"


def test_the_cache_is_private_and_never_written_through_a_link(
    semantic: ModuleType, tmp_path: Path
) -> None:
    import os
    import stat

    from daemon.fs import RefusedFile

    path = tmp_path / "data" / "embeddings.sqlite"
    before = os.umask(0o022)  # a usual umask: files 0644, directories 0755
    try:
        semantic.EmbeddingCache(path, "model-a", 2)
    finally:
        os.umask(before)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    elsewhere = tmp_path / "elsewhere.sqlite"
    linked = tmp_path / "data" / "linked.sqlite"
    linked.symlink_to(elsewhere)
    with pytest.raises(RefusedFile, match="symlink"):
        semantic.EmbeddingCache(linked, "model-a", 2)
    assert not elsewhere.exists()


def test_a_question_embedded_ahead_is_computed_once_beside_the_caller(
    shared: semantic_module.Semantic, embedder: MeaningEmbedder
) -> None:
    """Recall starts embedding its question in a thread of its own and finds it ready when
    it ranks by meaning; a failed embedding is not remembered."""
    import threading

    threads: list[str] = []
    embed = embedder.embed

    def recording(texts: Sequence[str], *, interruptible: bool = False) -> Any:
        threads.append(threading.current_thread().name)
        if texts == ["broken"]:
            raise RuntimeError("the model failed")
        return embed(texts, interruptible=interruptible)

    embedder.embed = recording  # type: ignore[method-assign]
    shared.embed_query_ahead("which instrument")
    ahead = shared.embed_query("which instrument")
    assert ahead.tolist() == embed(["which instrument"])[0].tolist()
    assert len(threads) == 1 and threads[0].startswith("cambium-query")
    shared.embed_query("which instrument")
    assert len(threads) == 1  # remembered
    with pytest.raises(RuntimeError):
        shared.embed_query("broken")
    with pytest.raises(RuntimeError):
        shared.embed_query("broken")
    assert len(threads) == 3  # asked again, not the failure remembered


def test_the_total_counts_a_file_indexed_after_the_pass_began(
    semantic: ModuleType,
    embedder: MeaningEmbedder,
    shared: semantic_module.Semantic,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the start indexes a file, the worker may count before the file's lines are in:
    the coverage must not then say "8 of 8 embedded" while the rest of the file waits."""
    directory = tmp_path / "daily"
    daily, worker = stored_daily(directory, store, shared, tmp_path)
    directory.mkdir(exist_ok=True)
    (directory / f"{DAY}.md").write_text("".join(f"a cello, take {n}\n" for n in range(12)))
    seen = []
    embed = embedder.embed

    def watching(texts: Sequence[str], *, interruptible: bool = False) -> Any:
        seen.append(worker.coverage())
        return embed(texts, interruptible=interruptible)

    def index_meanwhile() -> bool:  # the pass has counted; now the start indexes the file
        daily.refresh()
        return False

    embedder.embed = watching  # type: ignore[method-assign]
    monkeypatch.setattr(worker, "_marks", index_meanwhile)
    worker.run_once()
    assert [(c.embedded, c.total) for c in seen] == [(0, 12), (4, 12), (8, 12)]
    assert (worker.coverage().embedded, worker.coverage().total) == (12, 12)
