"""The real embedding model (all-MiniLM-L6-v2, int8 ONNX, from the ``semantic`` extra's
packages; nothing is downloaded) in process: what it places near what, and its int8
conversion. Skipped, with the reason, when the extra is not installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from semantic_model import DAILY, MODEL, QUESTION, TOKENIZER, embedding, semantic


@pytest.fixture(scope="module")
def embedder() -> embedding.OnnxEmbedder:
    return embedding.OnnxEmbedder(MODEL, TOKENIZER, model_id=embedding.DEFAULT_MODEL_ID, threads=1)


@pytest.fixture(scope="module")
def int8_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model the daemon runs: the packaged one with int8 products."""
    converted: Path = embedding.quantized_model(MODEL, tmp_path_factory.mktemp("m") / "int8.onnx")
    return converted


def test_the_model_places_a_paraphrase_nearer_than_unrelated_lines(
    embedder: embedding.OnnxEmbedder,
) -> None:
    lines = DAILY.splitlines()
    vectors = embedder.embed(lines)
    assert vectors.shape == (4, 384)
    assert [round(float(v @ v), 4) for v in vectors] == [1.0] * 4
    similarity = vectors @ embedder.embed([QUESTION])[0]
    assert int(similarity.argmax()) == 1  # the violin
    assert similarity[1] > semantic.DEFAULT_MIN_SIMILARITY > max(similarity[2:])
    # Batched or alone, a text gets the same vector.
    assert embedder.embed([lines[1]])[0] == pytest.approx(vectors[1], abs=1e-5)


def test_the_model_converted_to_int8_products_keeps_the_meaning(
    embedder: embedding.OnnxEmbedder, tmp_path: Path
) -> None:
    converted = embedding.quantized_model(MODEL, tmp_path / "int8.onnx")
    assert converted == tmp_path / "int8.onnx"
    fast = embedding.OnnxEmbedder(converted, TOKENIZER, model_id="int8", threads=1)
    lines = [*DAILY.splitlines(), QUESTION]
    agreement = (fast.embed(lines) * embedder.embed(lines)).sum(axis=1)
    assert min(agreement) > 0.97  # cosine between the two models' vectors of each text
    similarity = fast.embed(DAILY.splitlines()) @ fast.embed([QUESTION])[0]
    assert int(similarity.argmax()) == 1  # still the violin
    # Converted once: a second start uses the file as it is.
    written = converted.stat().st_mtime_ns
    assert embedding.quantized_model(MODEL, converted).stat().st_mtime_ns == written


# A child measures the high-water mark of its own model calls: a fresh process, the
# embedder loaded and warmed up first, the mark reset before the batch.
_PEAK_OF_A_BATCH = """
import ctypes, sys
from pathlib import Path
from daemon.search.embedding import OnnxEmbedder
model, tokenizer, words = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
def status(field):
    text = Path("/proc/self/status").read_text()
    return int(text.split(field + ":")[1].split()[0]) * 1024
embedder = OnnxEmbedder(model, tokenizer, model_id="int8", threads=1)
embedder.embed(["warm up"])
ctypes.CDLL("libc.so.6").malloc_trim(0)
before = status("VmRSS")
Path("/proc/self/clear_refs").write_text("5")
embedder.embed([" ".join(["memory"] * words)] * 32)
print(status("VmHWM") - before)
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize("words", [62, 126])
def test_a_batch_of_long_texts_stays_within_the_memory_cap(words: int, int8_model: Path) -> None:
    peak = subprocess.run(
        [sys.executable, "-c", _PEAK_OF_A_BATCH, str(int8_model), str(TOKENIZER), str(words)],
        capture_output=True,
        text=True,
        check=True,
    )
    # 32 texts of 64 and of 128 tokens: 135 and 393 MB in one call, were they not split.
    assert int(peak.stdout) <= embedding.DEFAULT_MEMORY_BYTES


def test_a_background_batch_makes_way_for_foreground_work_and_is_then_finished(
    int8_model: Path,
) -> None:
    """While a recall runs, the worker's model call leaves the cores to it (stopped, not
    slowed: this process uses next to no CPU meanwhile) and is run again after it."""
    import threading
    import time

    # One model call of about a second: 32 texts of some 150 tokens, within the memory cap.
    embedder = embedding.OnnxEmbedder(
        int8_model, TOKENIZER, model_id="int8", threads=1, memory_bytes=2048 * 1024 * 1024
    )
    texts = [f"day {n}: " + " ".join(DAILY.splitlines() * 4) for n in range(32)]
    expected = embedder.embed(texts)
    done: list[object] = []
    batch = threading.Thread(target=lambda: done.append(embedder.embed(texts, interruptible=True)))
    batch.start()
    time.sleep(0.05)  # the model call is running
    with embedder.foreground():
        time.sleep(0.05)  # stopped between two nodes
        before = time.process_time()
        time.sleep(0.5)
        used = time.process_time() - before
        assert done == []
    assert used < 0.1  # unpreempted, the batch would use the whole 0.5 s of a core
    batch.join(30)
    assert len(done) == 1 and done[0] == pytest.approx(expected, abs=1e-5)


def test_a_stopped_embedder_refuses_background_batches_but_answers_queries(
    int8_model: Path,
) -> None:
    embedder = embedding.OnnxEmbedder(int8_model, TOKENIZER, model_id="int8", threads=1)
    embedder.interrupt()
    with pytest.raises(embedding.Interrupted):
        embedder.embed([QUESTION], interruptible=True)
    assert embedder.embed([QUESTION]).shape == (1, 384)


def test_a_batch_stopped_once_is_run_to_its_end_whatever_comes_next(int8_model: Path) -> None:
    """Recalls one after another slow the worker but never hold it still: a model call
    foreground work stopped once is run again to its end, even if another recall begins."""
    import threading
    import time

    embedder = embedding.OnnxEmbedder(
        int8_model, TOKENIZER, model_id="int8", threads=1, memory_bytes=2048 * 1024 * 1024
    )
    texts = [f"day {n}: " + " ".join(DAILY.splitlines() * 4) for n in range(32)]
    done: list[object] = []
    batch = threading.Thread(target=lambda: done.append(embedder.embed(texts, interruptible=True)))
    batch.start()
    time.sleep(0.05)
    with embedder.foreground():  # stops the call
        time.sleep(0.05)
    time.sleep(embedding.QUIET_SECONDS + 0.1)  # the call runs again
    with embedder.foreground():  # and is not stopped this time
        deadline = time.monotonic() + 30
        while not done and time.monotonic() < deadline:
            time.sleep(0.05)
        assert done, "the call was stopped again"
    batch.join(5)
