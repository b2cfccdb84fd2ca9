"""The stored embeddings' records: where a vector belongs (a daily line or a mark), the
vector itself (int8 values and a scale), and what is still to be embedded. The rows live in
the store (``daemon.store.dense_rows``); the search over them is
:mod:`daemon.search.vector_file`'s."""

from __future__ import annotations

from dataclasses import dataclass

DAILY = "daily"
MARKS = "marks"
# A daily line's vector is kept under its day's live file, or under its archive, where the
# lines of a claim in flight are numbered as the archive will number them.
LIVE = "live"
ARCHIVED = "archived"


@dataclass(frozen=True, slots=True)
class Place:
    """Where a vector belongs: a line of a day's live or archived lines (``part`` its
    number), or a mark (``source`` its id, ``scope`` its workspace, ``part`` 0)."""

    layer: str
    source: str
    state: str = ""
    part: int = 0
    scope: str = ""


@dataclass(frozen=True, slots=True)
class Vector:
    """An embedding as stored: ``values`` int8 bytes, each times ``scale`` the float."""

    values: bytes
    scale: float


@dataclass(frozen=True, slots=True)
class NewVector:
    place: Place
    hash: bytes  # SHA-256 of the texts embedded
    vector: Vector
    digest: int = 0  # a mark's: the digest of the text row it was embedded from


@dataclass(frozen=True, slots=True)
class StoredVector:
    id: int
    place: Place
    vector: Vector


@dataclass(frozen=True, slots=True)
class MarkToEmbed:
    """A mark whose text has no vector yet (or an outdated one)."""

    id: str
    workspace: str
    digest: int
    observation: str
    row: int  # its text row's id: rows written later have higher ones


@dataclass(frozen=True, slots=True)
class Coverage:
    """How much of what recall ranks by meaning is embedded: ``embedded`` of ``total``
    documents (daily lines, marks, substrate lines), and how many were embedded per second
    over the last minute."""

    embedded: int
    total: int
    lines_per_second: float = 0.0

    def to_json(self) -> dict[str, int | float]:
        return {
            "embedded": self.embedded,
            "total": self.total,
            "lines_per_second": self.lines_per_second,
        }
