"""The real embedding model (all-MiniLM-L6-v2, int8 ONNX, from the ``semantic`` extra's
packages; nothing is downloaded) in process: what it places near what, and its int8
conversion. Skipped, with the reason, when the extra is not installed."""

from __future__ import annotations

from pathlib import Path

import pytest
from semantic_model import DAILY, MODEL, QUESTION, TOKENIZER, embedding, semantic


@pytest.fixture(scope="module")
def embedder() -> embedding.OnnxEmbedder:
    return embedding.OnnxEmbedder(MODEL, TOKENIZER, model_id=embedding.DEFAULT_MODEL_ID, threads=1)


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
