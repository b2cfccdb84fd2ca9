"""The store reads behind "no near-copies" and "subjects that converge".

Every query the receptors need for these lives here, so a change in the store's shape is
adapted in one place.

A new observation repeats a mark that still stands (active, withered or promoted: one live
mark per fact) under the same subject with the same words, case, whitespace and punctuation
aside: the mark's fingerprint finds it through an index, however long the subject's history.
Failing that, it is compared with the subject's :data:`CANDIDATES_PER_SUBJECT` most recently
reinforced marks (:func:`daemon.core.likeness.is_near_copy`), a bounded read; a threshold of
1 skips this.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from daemon.core.likeness import is_near_copy
from daemon.core.records import Mark
from daemon.store import Tx, fingerprint

CANDIDATES_PER_SUBJECT = 10


@dataclass(frozen=True, slots=True)
class Wanted:
    workspace: str
    subject: str  # normalized
    observation: str


def near_copies(tx: Tx, wanted: Sequence[Wanted], threshold: float) -> list[Mark | None]:
    """For each wanted observation, the mark it repeats: the oldest current mark (active,
    withered or promoted) under the same subject with the same words (found by fingerprint,
    however long the history), else, when ``threshold`` is below 1, the oldest of the
    subject's recent marks it nearly copies; or None."""
    marks = tx.marks
    recent: dict[tuple[str, str], list[tuple[str, str]]] = {}
    matched: list[str | None] = []
    for item in wanted:
        print_ = fingerprint(item.subject, item.observation)
        found = marks.oldest_with_fingerprint(item.workspace, item.subject, print_)
        if found is None and threshold < 1:
            key = (item.workspace, item.subject)
            candidates = recent.get(key)
            if candidates is None:
                candidates = recent[key] = marks.recent_texts(
                    item.workspace, item.subject, CANDIDATES_PER_SUBJECT
                )
            found = next(
                (i for i, text in candidates if is_near_copy(item.observation, text, threshold)),
                None,
            )
        matched.append(found)
    if not any(matched):
        return [None] * len(wanted)
    by_id = {m.id: m for m in marks.get_many([i for i in matched if i])}
    return [by_id.get(i) if i else None for i in matched]
