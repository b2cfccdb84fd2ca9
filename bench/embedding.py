"""The embedding side of semantic recall: how fast lines are embedded, how fast a query
searches the stored vectors in each candidate storage, and what it costs in memory.

1. **Embedding**: the daemon's worker (:class:`~daemon.services.embedding_worker.
   EmbeddingWorker`, the real model) embeds the first ``--lines`` lines of a LoCoMo
   conversation into a fresh SQLite store: lines per second, wall-clock and per CPU second
   of the process, and the resident memory it added.
2. **Vector search** at each of ``--sizes`` vectors of 384 dimensions (random unit
   vectors: a brute-force scan costs the same whatever they say), ``--queries`` queries,
   p50 and p99 of wall-clock and of this thread's CPU time, for:

   - ``int8 mmap``: :class:`~daemon.search.vector_file.VectorFiles`, what the daemon
     searches (int8 rows in memory-mapped files, scored by onnxruntime's MatMulInteger),
     holding beside the lines a tenth as many marks' vectors: every line, the last 7
     days' (the daily layer's default), and every mark (what the marks' layer searches,
     200 asked);
   - ``float32 in RAM``: the design before (a numpy float32 matrix held by the process,
     one matrix-vector product), as the baseline;
   - ``sqlite-vec``: its ``vec0`` table of ``int8[384]`` (k = 100), through ``apsw``
     (Python's own ``sqlite3`` here cannot load extensions); skipped, saying why, unless
     ``pip install -e '.[bench]'`` brought both;
   - ``pgvector``: on the PostgreSQL of ``CAMBIUM_TEST_POSTGRES_URL`` if the ``vector``
     extension is available there (Debian 12 ships no ``postgresql-15-pgvector``: then
     skipped, saying so).

   Beside each, the process's resident memory split into anonymous (the heap: what the
   process owns) and file-backed (mapped pages of the page cache, which the kernel takes
   back under pressure).

Run from the repository root::

    .venv/bin/python -m bench.embedding [--sizes 10000,100000,1000000] [--lines 400]

The load average is printed beside the figures: on a shared machine compare CPU times.
Results are written to ``bench/results/embedding.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.locomo import REPOSITORY, data_directory, new_store, percentile
from daemon.config import RecallConfig

RESULTS = REPOSITORY / "bench" / "results" / "embedding.json"
DIMENSION = 384
LIMIT = 100  # neighbours asked for, as the daily layer asks (DENSE_CANDIDATES)


def memory() -> dict[str, float]:
    """This process's resident memory now, in MB: all, anonymous, file-backed."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile"):
            fields[name] = int(value.split()[0]) / 1024
    return {"rss": fields["VmRSS"], "anon": fields["RssAnon"], "file": fields["RssFile"]}


def timed(search: Callable[[np.ndarray], object], queries: np.ndarray) -> dict[str, float]:
    """p50 / p99 of wall-clock and thread CPU milliseconds per query."""
    search(queries[0])  # warm: pages mapped, sessions made
    wall, cpu = [], []
    for query in queries:
        started, started_cpu = time.perf_counter(), time.thread_time()
        search(query)
        wall.append(1000 * (time.perf_counter() - started))
        cpu.append(1000 * (time.thread_time() - started_cpu))
    return {
        "p50_ms": round(statistics.median(wall), 2),
        "p99_ms": round(percentile(wall, 0.99), 2),
        "cpu_p50_ms": round(statistics.median(cpu), 2),
        "cpu_p99_ms": round(percentile(cpu, 0.99), 2),
    }


def beside_exact(search: Callable[[np.ndarray], list[Any]], queries: np.ndarray) -> dict[str, Any]:
    """``search`` as the daemon runs it (above SIGNS_ABOVE rows, a first pass by the signs)
    beside the same search scoring every row, in the same run: the exact one's times, and
    what share of the exact answer the daemon's holds, by id and as similar (at least as
    similar as the exact answer's last; random vectors are the hard case: real text's
    nearest stand further apart)."""
    from daemon.search import vector_file

    answers = [search(query) for query in queries]
    signs_above = vector_file.SIGNS_ABOVE
    vector_file.SIGNS_ABOVE = sys.maxsize
    try:
        exact_times = timed(search, queries)
        exact = [search(query) for query in queries]
    finally:
        vector_file.SIGNS_ABOVE = signs_above
    pairs = [(answer, best) for answer, best in zip(answers, exact, strict=True) if best]
    ids = [len({f.id for f in a} & {f.id for f in b}) / len(b) for a, b in pairs]
    alike = [sum(f.similarity >= b[-1].similarity for f in a) / len(b) for a, b in pairs]
    return {
        "exact": exact_times,
        "share_of_exact_ids": round(statistics.mean(ids), 3) if ids else None,
        "share_as_similar": round(statistics.mean(alike), 3) if alike else None,
    }


def unit_rows(count: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(count, DIMENSION)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


LINES_PER_DAY = 900
MARKS = 10  # lines for each mark, as in bench.recall_scale's three years


def write_vector_file(base: Path, count: int, kind: int, keys: Callable[[np.ndarray], Any]) -> None:
    """A vector file of ``count`` random vectors of ``kind``, row n with the key
    ``keys(n)``, written as the daemon lays it out, in chunks (never the whole float matrix
    at once)."""
    from daemon.search.vector_file import LAYOUT, SLOT

    for part in ("i8", "slots"):
        base.with_name(f"{base.name}.{part}").touch()
    os.truncate(base.with_name(base.name + ".i8"), count * DIMENSION)
    os.truncate(base.with_name(base.name + ".slots"), count * SLOT.itemsize)
    matrix = np.memmap(base.with_name(base.name + ".i8"), np.uint8, "r+", shape=(count, DIMENSION))
    slots = np.memmap(base.with_name(base.name + ".slots"), SLOT, "r+", shape=(count,))
    for start in range(0, count, 50_000):
        rows = unit_rows(min(50_000, count - start), start + kind)
        scales = np.abs(rows).max(axis=1) / 127
        values = np.rint(rows / scales[:, None]).astype(np.int8)
        matrix[start : start + len(rows)] = values.view(np.uint8) ^ np.uint8(0x80)  # (offset())
        at = np.arange(start, start + len(rows))
        chunk = slots[start : start + len(rows)]
        chunk["id"] = at + 1 + kind * 10_000_000
        chunk["scale"], chunk["kind"], chunk["key"] = scales, kind, keys(at)
        chunk["part"] = at % LINES_PER_DAY + 1
    matrix.flush()
    slots.flush()
    del matrix, slots
    header = {"model": "bench", "dimension": DIMENSION, "layout": LAYOUT, "generation": 1}
    base.with_name(base.name + ".json").write_text(json.dumps(header), encoding="utf-8")


def bench_int8_mmap(count: int, queries: np.ndarray, scratch: Path) -> dict[str, Any]:
    from daemon.search.marks import MAX_HITS
    from daemon.search.vector_file import LIVE_LINE, MARK, VectorFiles

    base = scratch / f"vectors-{count}"
    write_vector_file(base, count, LIVE_LINE, lambda n: 738_000 + n // LINES_PER_DAY)
    write_vector_file(base.with_name(base.name + ".marks"), count // MARKS, MARK, lambda n: 1)
    week = 738_000 + (count - 1) // LINES_PER_DAY - 6  # the daily layer's default horizon
    before = memory()
    file = VectorFiles(base, "bench", DIMENSION, writable=False)
    lines, of_marks = (LIVE_LINE,), file.of((MARK,))

    def every_line(query: np.ndarray) -> list[Any]:
        return file.lines.nearest(query, LIMIT, kinds=lines, floor=0.0)

    def every_mark(query: np.ndarray) -> list[Any]:
        return of_marks.nearest(query, MAX_HITS, kinds=(MARK,), floor=0.0, key=1)

    every = {**timed(every_line, queries), **beside_exact(every_line, queries)}
    recent = timed(
        lambda q: file.lines.nearest(q, LIMIT, kinds=lines, floor=0.0, since=week), queries
    )
    marks = {**timed(every_mark, queries), **beside_exact(every_mark, queries)}
    after = memory()
    file.close()
    for name in (base.name, base.name + ".marks"):
        for part in ("i8", "slots", "json"):
            base.with_name(f"{name}.{part}").unlink()
    return {
        **every,
        "last_7_days": recent,
        "marks": marks,
        "anon_mb_added": round(after["anon"] - before["anon"], 1),
        "file_mb_mapped": round(after["file"] - before["file"], 1),
        "disk_mb": round(count * 1.1 * (DIMENSION + 21) / 1e6, 1),
    }


def bench_float32(count: int, queries: np.ndarray) -> dict[str, Any]:
    before = memory()
    matrix = np.concatenate([unit_rows(min(50_000, count - s), s) for s in range(0, count, 50_000)])

    def search(query: np.ndarray) -> object:
        similarity = matrix @ query
        return np.argpartition(-similarity, LIMIT)[:LIMIT]

    figures = timed(search, queries)
    added = memory()["anon"] - before["anon"]
    return {**figures, "anon_mb_added": round(added, 1)}


def bench_sqlite_vec(count: int, queries: np.ndarray, scratch: Path) -> dict[str, Any]:
    try:
        import apsw
        import sqlite_vec
    except ImportError as exc:
        return {"skipped": f"{exc.name} is not installed (pip install -e '.[bench]')"}
    path = scratch / f"vec-{count}.db"
    connection = apsw.Connection(str(path))
    connection.enable_load_extension(True)
    connection.load_extension(sqlite_vec.loadable_path())
    connection.execute("CREATE VIRTUAL TABLE v USING vec0(embedding int8[384])")
    started = time.perf_counter()
    with connection:
        for start in range(0, count, 50_000):
            rows = unit_rows(min(50_000, count - start), start)
            values = np.rint(rows / (np.abs(rows).max(axis=1, keepdims=True) / 127)).astype(np.int8)
            connection.executemany(
                "INSERT INTO v (rowid, embedding) VALUES (?, vec_int8(?))",
                ((start + n + 1, row.tobytes()) for n, row in enumerate(values)),
            )
    inserted = time.perf_counter() - started
    before = memory()
    query = "SELECT rowid, distance FROM v WHERE embedding MATCH vec_int8(?) AND k = ?"

    def search(vector: np.ndarray) -> object:
        values = np.rint(vector / (np.abs(vector).max() / 127)).astype(np.int8)
        return connection.execute(query, (values.tobytes(), LIMIT)).fetchall()

    figures = timed(search, queries[: max(5, len(queries) // 4)])  # slow: fewer queries
    after = memory()
    connection.close()
    size = path.stat().st_size
    path.unlink()
    return {
        **figures,
        "insert_seconds": round(inserted, 1),
        "anon_mb_added": round(after["anon"] - before["anon"], 1),
        "disk_mb": round(size / 1e6, 1),
    }


def bench_pgvector(count: int, queries: np.ndarray) -> dict[str, Any]:
    url = os.environ.get("CAMBIUM_TEST_POSTGRES_URL")
    if not url:
        return {"skipped": "CAMBIUM_TEST_POSTGRES_URL is not set"}
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            available = connection.execute(
                text("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
            ).scalar_one()
    finally:
        engine.dispose()
    if not available:
        return {"skipped": "the vector extension is not available (no postgresql-15-pgvector)"}
    return {"skipped": "pgvector is available but not measured by this bench yet"}


def bench_embedding(lines: int, scratch: Path) -> dict[str, Any]:
    """The worker embedding the first ``lines`` lines of a LoCoMo conversation."""
    from contextlib import ExitStack

    from daemon.files.daily import DailyLog
    from daemon.search.semantic import load_semantic
    from daemon.services.dense_store import StoredLines, StoredVectors
    from daemon.services.embedding_worker import EmbeddingWorker
    from daemon.services.mark_search import MarkSearch
    from daemon.store import StoreTextIndex

    conversation = sorted(p for p in data_directory().iterdir() if (p / "daily").is_dir())[0]
    daily = scratch / "daily"
    daily.mkdir(parents=True)
    left = lines
    for source in sorted((conversation / "daily").glob("*.md")):
        taken = source.read_text(encoding="utf-8").splitlines()[:left]
        (daily / source.name).write_text("\n".join(taken) + "\n", encoding="utf-8")
        left -= len(taken)
        if left <= 0:
            break
    before = memory()
    semantic = load_semantic(RecallConfig(semantic=True, embeddings=scratch / "emb.sqlite"))
    semantic.embed_query("warm up")
    loaded = memory()
    with ExitStack() as stores:
        store = new_store(stores, str(scratch))
        model, dimension = semantic.embedder.model_id, semantic.embedder.dimension
        vectors = StoredVectors(store, scratch / "vectors", model, dimension, writable=True)
        log = DailyLog(daily, StoredLines(vectors, semantic), index=StoreTextIndex(store))
        worker = EmbeddingWorker(vectors, semantic, log, MarkSearch(), batch=64)
        vectors.prepare(worker.stopped)
        log.refresh()
        started, cpu = time.perf_counter(), time.process_time()
        worker.run_once()
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
        embedded = worker.embedded_by_model
    after = memory()
    return {
        "lines": embedded,
        "lines_per_second": round(embedded / seconds, 1),
        "lines_per_cpu_second": round(embedded / cpu_seconds, 1),
        "model_anon_mb": round(loaded["anon"] - before["anon"], 1),
        "embedding_anon_mb_added": round(after["anon"] - loaded["anon"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.embedding", description=__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--lines", type=int, default=400)
    arguments = parser.parse_args()
    sizes = [int(size) for size in arguments.sizes.split(",")]
    queries = unit_rows(arguments.queries, seed=999_999)
    results: dict[str, Any] = {"load_average_start": os.getloadavg()[0], "search": {}}
    with tempfile.TemporaryDirectory() as scratch:
        results["embedding"] = bench_embedding(arguments.lines, Path(scratch) / "embedding")
        print("embedding:", json.dumps(results["embedding"]), flush=True)
        for size in sizes:
            measured = {
                "int8 mmap": bench_int8_mmap(size, queries, Path(scratch)),
                "float32 in RAM": bench_float32(size, queries),
                "sqlite-vec": bench_sqlite_vec(size, queries, Path(scratch)),
                "pgvector": bench_pgvector(size, queries),
            }
            results["search"][str(size)] = measured
            for name, figures in measured.items():
                print(f"{size:>9,} {name:15} {json.dumps(figures)}", flush=True)
    results["load_average_end"] = os.getloadavg()[0]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(
        f"load average {results['load_average_start']:.1f} at the start, "
        f"{results['load_average_end']:.1f} at the end; written to "
        f"{RESULTS.relative_to(REPOSITORY)}"
    )


if __name__ == "__main__":
    main()
