"""The coarse first pass of a large vector search: rows by how many of their values' signs
differ from the query's."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")


def stored(values: list[list[int]]) -> np.ndarray:
    """int8 rows as the vector file holds them (each value plus 128)."""
    return (np.array(values, dtype=np.int16) + 128).astype(np.uint8)


def test_the_rows_whose_signs_differ_least_are_kept_in_slot_order() -> None:
    from daemon.search.sign_bits import SignBits

    query = np.array([5, -5, 5, -5, 5], dtype=np.int8)
    rows = [
        [1, 1, 1, 1, 1],  # slot 0: differs in 2 signs
        [9, -9, 9, -9, 9],  # 1: in none
        [-1, 1, -1, 1, -1],  # 2: in all 5
        [3, -3, 3, 3, 3],  # 3: in 1
        [2, -2, 2, 2, 2],  # 4: in 1
        [7, -7, 7, -7, -7],  # 5: in 1
    ]
    bits = SignBits(stored(rows), len(rows))
    everything = np.arange(len(rows))
    assert bits.nearest(everything, query, 1).tolist() == [1]
    # Three rows differ in one sign: the first two of them (by slot) make up three.
    assert bits.nearest(everything, query, 3).tolist() == [1, 3, 4]
    assert bits.nearest(everything, query, 5).tolist() == [0, 1, 3, 4, 5]
    assert bits.nearest(everything, query, 6).tolist() == [0, 1, 2, 3, 4, 5]
    # Positions in what was chosen, not slots.
    assert bits.nearest(np.array([0, 2, 5]), query, 2).tolist() == [0, 2]


def test_rows_written_later_are_counted_as_they_are_now() -> None:
    from daemon.search.sign_bits import SignBits

    query = np.array([1] * 70, dtype=np.int8)  # (two words of signs)
    bits = SignBits(stored([[-1] * 70, [-1] * 70]), 2)
    assert bits.nearest(np.arange(2), query, 1).tolist() == [0]
    bits.set([1], stored([[1] * 69 + [-1]]))
    assert bits.nearest(np.arange(2), query, 1).tolist() == [1]
    bits.set([4], stored([[1] * 70]))  # past the rows it held: it grows
    assert bits.nearest(np.array([0, 1, 4]), query, 1).tolist() == [2]
