"""A seed's target file as its review page shows it: the substrate file it names, its
current text, and a unified diff of the file with the proposed change added at its end.

Read only, through :class:`~daemon.files.substrate.Substrate` (the files are the person's:
the daemon never writes them, and a seed names no place in the file, so the diff shows the
change appended; the person makes the edit where it belongs). Only substrate files are
read: a seed naming any other path is shown as naming a file that is not there.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from daemon.core.records import Seed
from daemon.files.substrate import Substrate

CONTEXT_LINES = 3


@dataclass(frozen=True)
class DiffLine:
    kind: str  # file | hunk | added | removed | same
    text: str


@dataclass(frozen=True)
class Target:
    named: str  # the seed's target_file, as planted
    path: Path | None  # the substrate file it names; None: no substrate file is that
    text: str | None  # its current text
    diff: list[DiffLine]
    also: list[Path] = field(default_factory=list)  # other files the relative name fits


def seed_target(substrate: Substrate, seed: Seed) -> Target:
    """Blocking (it may read the files): run it in a worker thread."""
    named = seed.target_file
    matching = [path for path in substrate.files() if _names(named, path)]
    if not matching:
        return Target(named, None, None, _diff(named, None, seed.proposed_change))
    path, *also = matching
    try:
        text = substrate.read(path)
    except ValueError:  # gone since the listing
        return Target(named, None, None, _diff(named, None, seed.proposed_change))
    return Target(named, path, text, _diff(named, text, seed.proposed_change), also)


def _names(named: str, path: Path) -> bool:
    """Whether the seed's ``named`` file is ``path``: the same absolute path, or for a
    relative name, a path ending in it (``long-term/food.md`` names ``…/long-term/food.md``,
    never ``…/long-term/seafood.md``)."""
    relative = named.removeprefix("./")
    if Path(named).is_absolute():
        return Path(named) == path
    return str(path).endswith("/" + relative)


def with_change(text: str, change: str) -> str:
    """``text`` with ``change`` added as lines of its own at the end."""
    before = text if not text or text.endswith("\n") else text + "\n"
    return before + change.rstrip("\n") + "\n"


def _diff(named: str, text: str | None, change: str) -> list[DiffLine]:
    after = with_change(text or "", change).splitlines(keepends=True)
    lines = difflib.unified_diff(
        (text or "").splitlines(keepends=True),
        after,
        fromfile="/dev/null" if text is None else f"a/{named}",
        tofile=f"b/{named}",
        n=CONTEXT_LINES,
    )
    return [_line(number, line.rstrip("\n")) for number, line in enumerate(lines)]


def _line(number: int, line: str) -> DiffLine:
    if number < 2:  # the two file names (a removed line may start with --- too)
        return DiffLine("file", line)
    if line.startswith("@@"):
        return DiffLine("hunk", line)
    kinds = {"+": "added", "-": "removed"}
    return DiffLine(kinds.get(line[:1], "same"), line)
