"""A child process for the embedding crash test: runs the embedding worker over a store and
a daily directory with a deterministic, slow embedder that prints ``embedded <text>`` for
every text the moment the model is asked for it, so the parent knows what was computed
before it sends SIGKILL. At the end (unless killed) it prints ``done``.

Usage: python embedding_process.py DB_URL DAILY_DIRECTORY VECTORS_BASE SECONDS_PER_BATCH
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from test_fusion import MeaningEmbedder

from daemon.files.daily import DailyLog
from daemon.search.embedding import Vectors
from daemon.search.semantic import Semantic
from daemon.services.dense_store import StoredLines, StoredVectors
from daemon.services.embedding_worker import EmbeddingWorker
from daemon.services.mark_search import MarkSearch
from daemon.store import Store, StoreTextIndex


class SlowEmbedder(MeaningEmbedder):
    def __init__(self, pause: float) -> None:
        super().__init__()
        self.pause = pause

    def embed(self, texts: Sequence[str], *, interruptible: bool = False) -> Vectors:
        for text in texts:
            print("embedded", text.replace("\n", "|"), flush=True)
        time.sleep(self.pause)
        return super().embed(texts)


def main(url: str, directory: str, base: str, pause: str) -> None:
    store = Store(url)
    store.start()
    semantic = Semantic.create(SlowEmbedder(float(pause)), None, min_similarity=0.2)
    vectors = StoredVectors(store, Path(base), "meaning-test", 256, writable=True)
    daily = DailyLog(Path(directory), StoredLines(vectors, semantic), index=StoreTextIndex(store))
    worker = EmbeddingWorker(vectors, semantic, daily, MarkSearch(), batch=4)
    vectors.prepare(worker.stopped)
    daily.refresh()
    worker.run_once()
    print("done", flush=True)
    store.close()


if __name__ == "__main__":
    main(*sys.argv[1:5])
