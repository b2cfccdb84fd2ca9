"""The vectors recall searches: an int8 matrix in a memory-mapped file, beside the store.

The store holds every embedding as a row (:mod:`daemon.store.dense_rows`); this file is a
copy of them laid out for search, so that a query never loads the vectors into Python
objects: the matrix (``<base>.i8``, one row of ``dimension`` int8 values per slot, each
stored plus 128 as a byte: see :func:`offset`) and the slots' records (``<base>.slots``:
the row's id in the store, its scale, its key and part) are mapped into memory, where the
kernel's page cache holds them, not the daemon's heap. A query is quantized to int8 too and
scored against the rows in chunks by onnxruntime's ``MatMulInteger`` (products summed in
int32), then each score is scaled back to a cosine similarity.

The header (``<base>.json``) names the model, the dimension, how the values are laid out
and the store's generation the file holds; it is written, atomically, only after the
matrix and the records are flushed, so a copy whose header does not match the store is
known to be stale and is repaired (:mod:`daemon.services.dense_store`). A slot freed by a
deleted vector is zeroed on disk at once (a forgotten text's vector leaves no bytes
behind) and reused.

Not thread-safe on its own: :class:`daemon.services.dense_store.StoredVectors` serialises.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import onnxruntime
from numpy.typing import NDArray

from daemon.fs import make_private_file
from daemon.search.sign_bits import SignBits

FREE, LIVE_LINE, ARCHIVED_LINE, MARK = 0, 1, 2, 3
SLOT = np.dtype([("id", "<i8"), ("scale", "<f4"), ("key", "<i4"), ("part", "<i4"), ("kind", "i1")])
# How the values lie in the matrices (and that the marks' lie apart from the lines': see
# VectorFiles): a file of another layout (or none named) is not current, and is rebuilt
# from the store's rows like a stale one.
LAYOUT = "int8+128, marks apart"
GROWTH = 4096  # slots added at least when the files grow
CHUNK = 65_536  # rows scored per call of the model
# The rows a search chooses are scored where they lie in each window of this many rows
# that they fill at least half of (the others' scores thrown away), and gathered first
# from the rest. Gathering copies every row it scores: 100,000 rows, 3 ms a query before
# the model reads them again.
WINDOW = 4096
SELECTIONS = 16  # the selections of slots remembered until the slots change
# A search of more rows than this scores exactly only the FIRST_PASS rows (or one in
# FIRST_PASS_SHARE of them, or 20 times as many as it asks for, whichever is more) whose
# signs are nearest the query's (:mod:`daemon.search.sign_bits`).
# Measured on 100,000 marks of real text: 2 ms a query against 4-6 (and no slower from
# 16,384 rows on), and what it returns is as similar as the 200 most similar (98 % of
# them, the rest ties).
SIGNS_ABOVE = 20_000
FIRST_PASS = 4_000
FIRST_PASS_SHARE = 16

_Asked = tuple[tuple[int, ...], int | None, int | None]  # kinds, key, since
_Selection = tuple[NDArray[np.intp], NDArray[np.float32]]  # the slots, their scales


@dataclass(frozen=True, slots=True)
class Entry:
    """A vector as the file holds it: the store's row id, what kind of document, its key
    (a line's day as an ordinal, a mark's workspace code) and part (a line's number)."""

    id: int
    kind: int
    key: int
    part: int
    values: bytes  # int8
    scale: float


class Found(NamedTuple):  # (a tuple: a search makes 200 of them in the query thread)
    id: int
    kind: int
    key: int
    part: int
    similarity: float


def quantize(vector: NDArray[np.float32]) -> tuple[NDArray[np.int8], float]:
    """int8 values and the scale that brings them back (the largest magnitude is 127)."""
    largest = float(np.max(np.abs(vector))) if vector.size else 0.0
    if largest == 0.0:
        return np.zeros(vector.shape, dtype=np.int8), 0.0
    scale = largest / 127.0
    return np.clip(np.rint(vector / scale), -127, 127).astype(np.int8), scale


def offset(values: bytes) -> NDArray[np.uint8]:
    """int8 ``values`` as the matrix holds them: each plus 128, a byte from 1 to 255.
    onnxruntime multiplies unsigned rows by a signed query seven times faster than signed
    by signed (measured: 2.2 against 16 ms for 100,000 rows of 384, one thread), and the
    128s add the same amount to every row's product, taken off again (:meth:`_Scorer.dots`)."""
    shifted: NDArray[np.uint8] = np.frombuffer(values, dtype=np.uint8) ^ np.uint8(0x80)
    return shifted


class _Scorer:
    """Rows (int8 values stored plus 128) times an int8 query, summed in int32, by
    onnxruntime on one thread."""

    def __init__(self, dimension: int) -> None:
        from onnx import TensorProto, helper

        rows = helper.make_tensor_value_info("rows", TensorProto.UINT8, [None, dimension])
        query = helper.make_tensor_value_info("query", TensorProto.INT8, [dimension, 1])
        out = helper.make_tensor_value_info("dots", TensorProto.INT32, [None, 1])
        graph = helper.make_graph(
            [helper.make_node("MatMulInteger", ["rows", "query"], ["dots"])],
            "dots",
            [rows, query],
            [out],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
        model.ir_version = 8
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )

    def dots(self, rows: NDArray[np.uint8], query: NDArray[np.int8]) -> NDArray[np.int32]:
        """Each row's dot product with ``query``, in the values the rows stand for."""
        out: list[Any] = self._session.run(None, {"rows": rows, "query": query[:, None]})
        result: NDArray[np.int32] = out[0][:, 0] - np.int32(128 * int(query.sum(dtype=np.int32)))
        return result


class VectorFile:
    """The memory-mapped matrix and its slots (see the module's docstring)."""

    def __init__(self, base: Path, model: str, dimension: int, *, writable: bool = True) -> None:
        self.base = base
        self.model = model
        self.dimension = dimension
        self.writable = writable
        self._paths = {part: base.with_name(f"{base.name}.{part}") for part in ("i8", "slots")}
        self._header = base.with_name(f"{base.name}.json")
        self.generation = -1  # unknown: nothing the store holds
        if writable:
            for path in self._paths.values():
                make_private_file(path)
        header = self._read_header()
        if header is not None:
            self.generation = int(header["generation"])
        elif writable:
            self._truncate(0)
        self._scorer = _Scorer(dimension)
        self._map()

    # -- the files -----------------------------------------------------------------------

    def _read_header(self) -> dict[str, Any] | None:
        try:
            header: dict[str, Any] = json.loads(self._header.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        wanted = {"model": self.model, "dimension": self.dimension, "layout": LAYOUT}
        if any(header.get(name) != value for name, value in wanted.items()):
            return None
        return header

    def _capacity(self) -> int:
        try:
            size = self._paths["slots"].stat().st_size
        except OSError:
            return 0
        return min(size // SLOT.itemsize, self._paths["i8"].stat().st_size // self.dimension)

    def _map(self) -> None:
        capacity = self._capacity()
        mode: Literal["r+", "r"] = "r+" if self.writable else "r"
        if capacity == 0:
            self._matrix: NDArray[np.uint8] = np.zeros((0, self.dimension), dtype=np.uint8)
            self._slots: NDArray[Any] = np.zeros(0, dtype=SLOT)
        else:
            self._matrix = np.memmap(
                str(self._paths["i8"]), dtype=np.uint8, mode=mode, shape=(capacity, self.dimension)
            )
            self._slots = np.memmap(
                str(self._paths["slots"]), dtype=SLOT, mode=mode, shape=(capacity,)
            )
        used = np.flatnonzero(self._slots["kind"] != FREE)
        self._selections: dict[_Asked, _Selection] = {}
        self._signs: SignBits | None = None  # (built when a search first needs them)
        self._high = int(used[-1]) + 1 if used.size else 0
        self._free = [int(s) for s in np.flatnonzero(self._slots["kind"][: self._high] == FREE)]
        self.live = int(used.size)

    def _truncate(self, capacity: int) -> None:
        for part, width in (("i8", self.dimension), ("slots", SLOT.itemsize)):
            os.truncate(self._paths[part], capacity * width)

    def _grow(self, needed: int) -> None:
        capacity = len(self._slots)
        if needed <= capacity:
            return
        self._flush()
        self._truncate(max(needed, capacity * 2, GROWTH))
        self._map()

    def _flush(self) -> None:
        for mapped in (self._matrix, self._slots):
            if isinstance(mapped, np.memmap):
                mapped.flush()

    def commit(self, generation: int) -> None:
        """Make what was written durable, then record that it is the store's
        ``generation``."""
        self._flush()
        for path in self._paths.values():
            with path.open("rb") as opened:
                os.fsync(opened.fileno())
        header = {
            "model": self.model,
            "dimension": self.dimension,
            "layout": LAYOUT,
            "generation": generation,
        }
        temporary = self._header.with_name(self._header.name + ".tmp")
        make_private_file(temporary)
        with temporary.open("w", encoding="utf-8") as opened:
            opened.write(json.dumps(header))
            opened.flush()
            os.fsync(opened.fileno())
        os.replace(temporary, self._header)
        self.generation = generation

    def clear(self) -> None:
        """Empty the file (every slot zeroed on disk)."""
        self._flush()
        self._matrix = np.zeros((0, self.dimension), dtype=np.uint8)
        self._slots = np.zeros(0, dtype=SLOT)
        self._truncate(0)
        self._map()

    # -- writing -------------------------------------------------------------------------

    def put(self, entries: Sequence[Entry]) -> None:
        """Write ``entries`` into free slots (the files grow as needed)."""
        reused = min(len(self._free), len(entries))
        slots = [self._free.pop() for _ in range(reused)]
        slots += range(self._high, self._high + len(entries) - reused)
        self._grow(self._high + len(entries) - reused)
        self._high += len(entries) - reused
        for slot, entry in zip(slots, entries, strict=True):
            self._matrix[slot] = offset(entry.values)
            self._slots[slot] = (entry.id, entry.scale, entry.key, entry.part, entry.kind)
        if self._signs is not None:
            self._signs.set(slots, np.asarray(self._matrix[slots]))
        self.live += len(entries)
        self._selections.clear()

    def remove(self, ids: Sequence[int]) -> int:
        """Zero the slots of these row ids (on disk at the next :meth:`commit`); how many."""
        if not ids or self._high == 0:
            return 0
        held = self._slots[: self._high]
        slots = np.flatnonzero(
            np.isin(held["id"], np.asarray(ids, dtype=np.int64)) & (held["kind"] != FREE)
        )
        self._matrix[slots] = 0
        self._slots[slots] = np.zeros(1, dtype=SLOT)
        if self._signs is not None:
            self._signs.set(slots.tolist(), np.asarray(self._matrix[slots]))
        self._selections.clear()
        self._free.extend(int(s) for s in slots)
        self.live -= len(slots)
        return len(slots)

    def ids(self) -> NDArray[np.int64]:
        """The store ids of every vector held."""
        held = self._slots[: self._high]
        ids: NDArray[np.int64] = held["id"][held["kind"] != FREE]
        return ids

    # -- searching -----------------------------------------------------------------------

    def nearest(
        self,
        query: NDArray[np.float32],
        limit: int,
        *,
        kinds: Sequence[int],
        floor: float,
        key: int | None = None,
        since: int | None = None,
    ) -> list[Found]:
        """The ``limit`` most similar vectors of ``kinds`` (with ``key`` equal to ``key``,
        or at least ``since``) whose similarity is at least ``floor``, most similar first."""
        # Plain arrays over the mapped ones: each view of a memmap passes through Python
        # (``__array_finalize__``), and so would every field and row taken from it.
        held = np.asarray(self._slots[: self._high])
        if limit <= 0 or held.size == 0 or not kinds:
            return []
        chosen, scales = self._selected(held, tuple(kinds), key, since)
        if chosen.size == 0:
            return []
        values, scale = quantize(query)
        if chosen.size > SIGNS_ABOVE:
            if self._signs is None:
                self._signs = SignBits(self._matrix, self._high)
            first = max(FIRST_PASS, 20 * limit, chosen.size // FIRST_PASS_SHARE)
            kept = self._signs.nearest(chosen, values, first)
            chosen, scales = chosen[kept], scales[kept]
        similarity = self._score(chosen, values) * scales * np.float32(scale)
        top = chosen.size if limit >= chosen.size else limit
        best = np.argpartition(-similarity, top - 1)[:top]
        best = best[np.argsort(-similarity[best], kind="stable")]
        best = best[similarity[best] >= floor]
        # Whole columns to Python at once: a record read at a time cost ~1 ms for 200.
        found = held[chosen[best]]
        columns = (found["id"], found["kind"], found["key"], found["part"], similarity[best])
        return list(map(Found._make, zip(*(column.tolist() for column in columns), strict=True)))

    def _selected(
        self, held: NDArray[Any], kinds: tuple[int, ...], key: int | None, since: int | None
    ) -> _Selection:
        """The slots of ``kinds`` (with ``key`` equal to ``key``, or at least ``since``), in
        order, and their scales: remembered until the slots change, for each test reads
        every slot (about 1 ms each at a million)."""
        asked = (kinds, key, since)
        selection = self._selections.get(asked)
        if selection is not None:
            return selection
        wanted = held["kind"] == kinds[0]  # (np.isin: 61 µs for one kind of 18,752 slots; this 10)
        for kind in kinds[1:]:
            wanted |= held["kind"] == kind
        if key is not None:
            wanted &= held["key"] == key
        if since is not None:
            wanted &= held["key"] >= since
        chosen = np.flatnonzero(wanted)
        if len(self._selections) >= SELECTIONS:
            self._selections.clear()
        selection = self._selections[asked] = (chosen, held["scale"][chosen])
        return selection

    def _score(self, chosen: NDArray[np.intp], query: NDArray[np.int8]) -> NDArray[np.float32]:
        """The int8 dot products of the rows ``chosen`` (in order) with ``query``, as
        floats: where they fill a window, in place; the rest gathered (see WINDOW)."""
        scores = np.empty(chosen.size, dtype=np.float32)
        matrix = np.asarray(self._matrix)
        bounds = np.searchsorted(chosen, np.arange(0, self._high + WINDOW, WINDOW))
        counts = np.diff(bounds)
        full = counts * 2 >= WINDOW
        # Runs of full windows, [first, last), each scored in calls of up to CHUNK rows.
        edges = np.flatnonzero(np.diff(np.concatenate(([0], full.view(np.int8), [0]))))
        for first, last in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
            stop = min(last * WINDOW, self._high)
            for start in range(first * WINDOW, stop, CHUNK):
                end = min(start + CHUNK, stop)
                inside = slice(*np.searchsorted(chosen, (start, end)).tolist())
                dots = self._scorer.dots(matrix[start:end], query)
                scores[inside] = dots[chosen[inside] - start]
        gathered = np.flatnonzero(np.repeat(~full, counts))
        for start in range(0, gathered.size, CHUNK):
            positions = gathered[start : start + CHUNK]
            scores[positions] = self._scorer.dots(matrix[chosen[positions]], query)
        return scores

    def close(self) -> None:
        self._flush()
        self._matrix = np.zeros((0, self.dimension), dtype=np.uint8)
        self._slots = np.zeros(0, dtype=SLOT)


class VectorFiles:
    """The daily lines' vectors and the marks', each in a :class:`VectorFile` of its own
    (``<base>`` and ``<base>.marks``), committed together under one generation. A search
    asks for lines or for marks, and reads only those rows: in one file a person's marks
    lie between each day's lines, and a search of them gathered every one first (100,000
    marks beside a million lines: 12 ms of CPU a query, against 6.6 ms in a file of their
    own)."""

    def __init__(self, base: Path, model: str, dimension: int, *, writable: bool = True) -> None:
        self.lines = VectorFile(base, model, dimension, writable=writable)
        marks = base.with_name(f"{base.name}.marks")
        self.marks = VectorFile(marks, model, dimension, writable=writable)
        self._files = (self.lines, self.marks)

    def _of(self, kind: int) -> VectorFile:
        return self.marks if kind == MARK else self.lines

    @property
    def generation(self) -> int:
        """The store's generation both files hold (-1: they are not of one)."""
        lines, marks = self.lines.generation, self.marks.generation
        return lines if lines == marks else -1

    @property
    def live(self) -> int:
        return self.lines.live + self.marks.live

    def ids(self) -> NDArray[np.int64]:
        ids: NDArray[np.int64] = np.concatenate([file.ids() for file in self._files])
        return ids

    def put(self, entries: Sequence[Entry]) -> None:
        for file in self._files:
            if mine := [entry for entry in entries if self._of(entry.kind) is file]:
                file.put(mine)

    def remove(self, ids: Sequence[int]) -> int:
        return sum(file.remove(ids) for file in self._files)

    def of(self, kinds: Sequence[int]) -> VectorFile:
        """The file a search of ``kinds`` reads (lines or marks, not both)."""
        file = self._of(kinds[0]) if kinds else self.lines
        if any(self._of(kind) is not file for kind in kinds):
            raise ValueError("lines and marks are searched apart")
        return file

    def commit(self, generation: int) -> None:
        for file in self._files:
            file.commit(generation)

    def clear(self) -> None:
        for file in self._files:
            file.clear()

    def close(self) -> None:
        for file in self._files:
            file.close()
