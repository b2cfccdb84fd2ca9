"""The signal types the daemon's own receptors apply, each named once. Anyone may emit any
other type (the bus stores it; a receptor bound to it applies it)."""

from __future__ import annotations

from typing import Final

OBSERVATION: Final = "memory.observation"
DAILY_NOTE: Final = "memory.daily_note"
CONSOLIDATE: Final = "memory.consolidate"
SEED_PLANTED: Final = "memory.seed_planted"
SEED_REVIEWED: Final = "memory.seed_reviewed"
SEED_REVIEW_UNDONE: Final = "memory.seed_review_undone"
SEED_DIGEST: Final = "memory.seed_digest"
MARK_CORRECTED: Final = "memory.mark_corrected"
MARK_RETRACTED: Final = "memory.mark_retracted"
FORGET: Final = "memory.forget"
DELIVERY_DISCARDED: Final = "memory.delivery_discarded"
