"""What ``memory.forget`` erases from a signal payload: any payload that carries the text of
a forgotten mark (in any string, at any depth) is replaced by a pointer to the tombstone."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from daemon.core import signal_types

# Signal types whose payloads carry free text that can become (or correct) a mark.
TEXT_CARRYING_TYPES = (
    signal_types.OBSERVATION,
    signal_types.MARK_CORRECTED,
    signal_types.DAILY_NOTE,
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
