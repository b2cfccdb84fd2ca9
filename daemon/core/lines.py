"""How a daily file's bytes are numbered into lines: split on ``\\n`` only (a trailing
``\\r`` dropped), 1-indexed, so numbers agree with any editor and with the text index."""

from __future__ import annotations

from collections.abc import Sequence


def split_lines(data: bytes) -> list[str]:
    """Lines split on ``\\n`` only, so numbering matches what an editor shows; a final
    newline ends the last line rather than opening an empty one."""
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def lines_between(data: bytes, start: int, end: int) -> list[str] | None:
    """Lines ``start`` to ``end`` of ``data`` (1-indexed, inclusive), as :func:`split_lines`
    numbers and decodes them, or ``None`` if ``data`` holds fewer than ``end`` lines. Only
    the first ``end`` lines are split and decoded (no byte of a multi-byte UTF-8 character
    is a newline, so each line decodes alone as it does in the whole)."""
    pieces = data.split(b"\n", end)
    if len(pieces) <= end:  # the whole of data was split: its last piece may be no line
        if pieces[-1] == b"":
            pieces.pop()
        if len(pieces) < end:
            return None
    return [
        piece.decode("utf-8", errors="replace").removesuffix("\r")
        for piece in pieces[start - 1 : end]
    ]


def line_span(line_range: Sequence[int]) -> str:
    """How a person reads a cited range: "line 3" or "lines 3-5"."""
    start, end = line_range
    return f"line {start}" if start == end else f"lines {start}-{end}"
