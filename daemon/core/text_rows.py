"""The text index's records: what a layer keeps in it (rows, in groups, with the signature
of the file they were read from) and what it answers (candidates, statistics). The index
itself is :class:`daemon.search.index.TextIndex`, kept in the store."""

from __future__ import annotations

from dataclasses import dataclass

DAILY = "daily"
MARKS = "marks"
SUBSTRATE = "substrate"
COMPOST = "compost"
LAYERS = (DAILY, MARKS, SUBSTRATE, COMPOST)

# Daily rows' states: a live file, a claim in flight (or failed) and the archive.
LIVE = "live"
CLAIMED = "claimed"
ARCHIVED = "archived"


@dataclass(frozen=True, slots=True)
class Group:
    """Rows kept together: a daily file's lines (``source`` the day, ``state`` which file),
    a mark (``source`` its id, ``scope`` its workspace), a substrate file (``source`` its
    path: one row, its whole text) or a compost file's learnings (``source`` its path)."""

    layer: str
    source: str
    state: str = ""
    scope: str = ""


@dataclass(frozen=True, slots=True)
class Row:
    """One text: its position in the group, its terms, and a digest of the text itself."""

    part: int
    terms: str  # space-separated
    length: int  # how many terms
    digest: int  # of the text: tells whether a row is still what the file holds
    speaker: str | None = None  # casefolded, for a log line "Anna: …"


@dataclass(frozen=True, slots=True)
class Signature:
    """A file as it was when its rows were written."""

    size: int
    mtime_ns: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Candidate:
    source: str
    state: str
    part: int
    terms: str
    length: int
    speaker: str | None


@dataclass(frozen=True, slots=True)
class Statistics:
    """What BM25 needs of a whole layer: rows with terms, their total length, and how many
    rows hold each term asked for."""

    documents: int
    total_length: int
    frequencies: dict[str, int]
