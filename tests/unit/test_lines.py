"""A daily file's lines: a slice read up to its range is the same as the whole file split."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from daemon.core.lines import lines_between, split_lines

# Bytes that make lines of every kind: empty ones, CRLF endings, a final line without an
# ending, a stray \r, multi-byte characters and bytes that are no UTF-8 at all.
PIECES = st.sampled_from([b"\n", b"\r\n", b"\r", b"a", b"Anna: tea", "ü€".encode(), b"\xff\xe2"])


@given(st.lists(PIECES, max_size=30).map(b"".join), st.integers(1, 12), st.integers(0, 4))
def test_a_range_read_alone_is_that_range_of_the_whole_file(
    data: bytes, start: int, more: int
) -> None:
    whole = split_lines(data)
    end = start + more
    expected = whole[start - 1 : end] if end <= len(whole) else None
    assert lines_between(data, start, end) == expected


def test_a_final_newline_ends_the_last_line_rather_than_opening_one() -> None:
    assert lines_between(b"one\ntwo\n", 2, 2) == ["two"]
    assert lines_between(b"one\ntwo\n", 3, 3) is None
    assert lines_between(b"one\ntwo", 2, 2) == ["two"]
    assert lines_between(b"one\n\n", 2, 2) == [""]
