"""The small SQL helpers the query modules share."""

from __future__ import annotations

import pytest

from daemon.store.sql import IN_LIST_LIMIT, in_chunks


@pytest.mark.parametrize(
    ("count", "sizes"),
    [
        (0, []),
        (1, [1]),
        (IN_LIST_LIMIT, [IN_LIST_LIMIT]),
        (IN_LIST_LIMIT + 1, [IN_LIST_LIMIT, 1]),
        (2 * IN_LIST_LIMIT + 3, [IN_LIST_LIMIT, IN_LIST_LIMIT, 3]),
    ],
)
def test_in_chunks_gives_every_item_once_in_order_in_bounded_slices(
    count: int, sizes: list[int]
) -> None:
    items = list(range(count))
    chunks = list(in_chunks(items))
    assert [len(chunk) for chunk in chunks] == sizes
    assert [item for chunk in chunks for item in chunk] == items


def test_in_chunks_of_a_given_size() -> None:
    assert [list(c) for c in in_chunks("abcdefg", 3)] == [["a", "b", "c"], ["d", "e", "f"], ["g"]]
