"""The small SQL helpers the query modules share."""

from __future__ import annotations

import pytest

from daemon.store.sql import IN_LIST_LIMIT, in_chunks


@pytest.mark.parametrize(
    ("count", "sizes"),
    [
        (0, []),
        (1, [1]),
        (3, [4]),
        (200, [256]),
        (IN_LIST_LIMIT, [IN_LIST_LIMIT]),
        (IN_LIST_LIMIT + 1, [IN_LIST_LIMIT, 1]),
        (2 * IN_LIST_LIMIT + 3, [IN_LIST_LIMIT, IN_LIST_LIMIT, 4]),
    ],
)
def test_in_chunks_give_every_item_in_order_in_bounded_slices_of_few_shapes(
    count: int, sizes: list[int]
) -> None:
    """Each slice is padded to a power of two (or the bound) with copies of its last item:
    an IN list means the same, and its statement takes one of a dozen shapes."""
    items = list(range(count))
    chunks = list(in_chunks(items))
    assert [len(chunk) for chunk in chunks] == sizes
    assert [item for chunk in chunks for item in dict.fromkeys(chunk)] == items


def test_in_chunks_of_a_given_size() -> None:
    assert [list(c) for c in in_chunks("abcdefg", 3)] == [["a", "b", "c"], ["d", "e", "f"], ["g"]]
    assert [list(c) for c in in_chunks("abcde", 4)] == [["a", "b", "c", "d"], ["e"]]
    assert [list(c) for c in in_chunks("abc", 8)] == [["a", "b", "c", "c"]]
