"""A first, coarse pass over many vectors: each as the signs of its values.

Scoring a row of the int8 matrix reads all of it (384 bytes); at 100,000 marks a query
streams 38 MB through the core, 4-7 ms here, and the caches it flushes slow the lexical
search running beside it on the other core. The signs of a row fit in 48 bytes, and the
number of signs a row shares with the query (the Hamming distance, counted by the CPU's
popcount) follows the angle between them. So a large search first keeps the rows whose
signs are nearest the query's, then scores only those exactly
(:meth:`daemon.search.vector_file.VectorFile.nearest`).

The bits are held in memory beside the mapped matrix, a row of 64-bit words per word of
signs (all the rows' first words together, and so on: each pass of the count runs over one
contiguous array), computed from the matrix when a search first needs them and kept
current as rows are written.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

BUILT_PER_STEP = 65_536  # rows turned into bits at a time (the comparison copies them)


def _words(rows: NDArray[np.uint8], words: int) -> NDArray[np.uint64]:
    """The sign bits of ``rows`` (int8 values stored plus 128: positive above 128), as
    ``words`` 64-bit words a row, one row of the result per word."""
    packed = np.packbits(rows > 128, axis=1)
    padded = np.zeros((len(rows), words * 8), dtype=np.uint8)
    padded[:, : packed.shape[1]] = packed
    result: NDArray[np.uint64] = np.ascontiguousarray(padded.view(np.uint64).T)
    return result


class SignBits:
    """The sign bits of every row of a matrix, by slot (see the module's docstring)."""

    def __init__(self, matrix: NDArray[np.uint8], rows: int) -> None:
        """The bits of the first ``rows`` rows of ``matrix``."""
        self._dimension = matrix.shape[1]
        self._columns = np.zeros((-(-self._dimension // 64), rows), dtype=np.uint64)
        for start in range(0, rows, BUILT_PER_STEP):
            end = min(start + BUILT_PER_STEP, rows)
            self._columns[:, start:end] = _words(np.asarray(matrix[start:end]), len(self._columns))

    def set(self, slots: Sequence[int], rows: NDArray[np.uint8]) -> None:
        """``rows`` were written at ``slots``."""
        if not len(slots):
            return
        needed = max(slots) + 1
        if needed > self._columns.shape[1]:  # grown like a list: at least doubled
            width = max(needed, 2 * self._columns.shape[1])
            grown = np.zeros((len(self._columns), width), dtype=np.uint64)
            grown[:, : self._columns.shape[1]] = self._columns
            self._columns = grown
        self._columns[:, np.asarray(slots)] = _words(rows, len(self._columns))

    def nearest(
        self, chosen: NDArray[np.intp], query: NDArray[np.int8], count: int
    ) -> NDArray[np.intp]:
        """The positions in ``chosen`` (slots, in order) of the ``count`` rows whose signs
        are nearest ``query``'s (ties at the last distance taken in slot order), in order."""
        signs = _words((query.astype(np.int16) + 128).astype(np.uint8)[None, :], len(self._columns))
        end = int(chosen[-1]) + 1 if chosen.size else 0
        distance = np.zeros(end, dtype=np.uint16)
        for column, word in zip(self._columns, signs[:, 0], strict=True):
            distance += np.bitwise_count(column[:end] ^ word)
        if chosen.size < end:  # (else every slot up to the last is chosen)
            distance = distance[chosen]
        # A threshold from the distances' histogram (a few hundred values) instead of a
        # partition of them all: every row nearer than it, and the first ones at it.
        counted = np.cumsum(np.bincount(distance, minlength=self._dimension + 1))
        last = int(np.searchsorted(counted, count))
        nearer = int(counted[last - 1]) if last else 0
        kept = distance < last
        kept[np.flatnonzero(distance == last)[: count - nearer]] = True
        return np.flatnonzero(kept)
