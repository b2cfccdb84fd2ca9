"""What ``memory.forget`` erases from a signal payload: any payload that carries the text of
a forgotten mark (in any string, at any depth) is replaced by a pointer to the tombstone;
and how it redacts what else kept the text (a delivery's checkpoint, its last error)."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from daemon.core import signal_types

# Signal types whose payloads carry free text that can become (or correct) a mark.
TEXT_CARRYING_TYPES = (
    signal_types.OBSERVATION,
    signal_types.MARK_CORRECTED,
    signal_types.DAILY_NOTE,
    signal_types.SEED_PLANTED,
)


def carries(value: Any, texts: Collection[str]) -> bool:
    """Whether any string inside ``value`` contains one of ``texts`` (empty texts ignored)."""
    wanted = [t for t in texts if t]
    if not wanted:
        return False
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if any(t in item for t in wanted):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def about(payload: dict[str, Any], subjects: Collection[str], mark_ids: Collection[str]) -> bool:
    """Whether a payload found by scanning the log is about the forgotten marks: it names
    one of their subjects or ids (an observation's ``subject``, a correction's ``mark_id``,
    a daily note's ``OBS subject=...`` line). Carrying the text alone is not enough: a
    short text ("tea") would otherwise erase unrelated notes."""
    if payload.get("subject") in subjects or payload.get("mark_id") in mark_ids:
        return True
    return carries(payload, [f"subject={s}" for s in subjects])


def erased_payload(tombstone_id: str) -> dict[str, Any]:
    """What an erased signal's payload becomes."""
    return {"forgotten": tombstone_id}


def redacted(value: Any, texts: Collection[str], marker: str) -> Any:
    """``value`` without ``texts``: in a list, an item that is an object or a list and
    carries one of them is dropped (a checkpoint's extractions: the forgotten one must not
    come back when the delivery is retried); in a string, each occurrence becomes
    ``marker``. Anything else is kept as it is."""
    wanted = [t for t in texts if t]
    if isinstance(value, str):
        for text in wanted:
            value = value.replace(text, marker)
        return value
    if isinstance(value, dict):
        return {key: redacted(item, wanted, marker) for key, item in value.items()}
    if isinstance(value, list):
        return [
            redacted(item, wanted, marker)
            for item in value
            if isinstance(item, str) or not carries(item, wanted)
        ]
    return value


def forgotten_marker(tombstone_id: str) -> str:
    """What replaces forgotten text in the files and records that keep their shape."""
    return f"[forgotten: {tombstone_id}]"


def mentions(line: str, forgotten: Collection[str]) -> bool:
    """Whether a line of a person's own file still mentions what was forgotten: one of the
    texts (any case), or a subject, as its path or its last segment as a word (names and
    topics live there: ``people.arnold`` for "lunch with Arnold")."""
    folded = line.casefold()
    for item in forgotten:
        wanted = item.casefold().strip()
        if not wanted:
            continue
        if wanted in folded:
            return True
        last = wanted.rsplit(".", 1)[-1]
        subject = "." in wanted and " " not in wanted and len(last) >= 3
        if subject and re.search(rf"\b{re.escape(last)}\b", folded):
            return True
    return False
