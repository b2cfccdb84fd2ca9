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

from collections import defaultdict
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
    prints = [fingerprint(w.subject, w.observation) for w in wanted]
    oldest = tx.marks.oldest_by_fingerprint({w.workspace for w in wanted}, sorted(set(prints)))
    matched = [oldest.get((w.workspace, p)) for w, p in zip(wanted, prints, strict=True)]
    if threshold < 1:
        candidates = _recent(tx, [w for w, m in zip(wanted, matched, strict=True) if m is None])
        for index, item in enumerate(wanted):
            if matched[index] is None:
                matched[index] = next(
                    (
                        mark_id
                        for mark_id, text in candidates.get((item.workspace, item.subject), [])
                        if is_near_copy(item.observation, text, threshold)
                    ),
                    None,
                )
    marks = {m.id: m for m in tx.marks.get_many([i for i in matched if i])}
    return [marks.get(i) if i else None for i in matched]


def _recent(tx: Tx, wanted: Sequence[Wanted]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(id, text) of the recent marks under each wanted subject, oldest first."""
    by_workspace: dict[str, set[str]] = defaultdict(set)
    for item in wanted:
        by_workspace[item.workspace].add(item.subject)
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for workspace, subjects in by_workspace.items():
        texts = tx.marks.recent_texts(workspace, list(subjects), CANDIDATES_PER_SUBJECT)
        found.update(((workspace, subject), pairs) for subject, pairs in texts.items())
    return found
