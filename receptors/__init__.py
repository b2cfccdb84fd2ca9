"""Receptors: what the bus delivers signals to. One module per receptor. May import
services and everything below them; never the API, the CLI or the process.

| signal type                                   | receptor (key)                |
|-----------------------------------------------|-------------------------------|
| ``memory.observation``                        | observation                   |
| ``memory.seed_planted``, ``memory.seed_reviewed``, ``memory.seed_review_undone`` | seeds |
| ``memory.mark_corrected``, ``memory.mark_retracted``, ``memory.forget`` | governance |
| ``memory.seed_digest`` (weekly rhythm)        | digest                        |
| ``memory.consolidate``                        | consolidation                 |
| ``memory.daily_note``                         | daily                         |
"""

from __future__ import annotations

from daemon.bus import Receptor
from daemon.config import Config
from daemon.files.daily import DailyLog
from daemon.store import Store
from receptors.consolidation import ConsolidationReceptor
from receptors.daily_note import DailyNoteReceptor
from receptors.digest import DigestReceptor
from receptors.extractors import make_extractor
from receptors.governance import GovernanceReceptor
from receptors.observation import ObservationReceptor
from receptors.seeds import SeedReceptor


def build_receptors(config: Config, store: Store, daily: DailyLog) -> list[Receptor]:
    """The daemon's receptors, configured. Raises ValueError for an unknown extractor or an
    LLM key that cannot be read."""
    return [
        ObservationReceptor(
            reinforce_delta=config.observation.reinforce_delta,
            similarity=config.observation.similarity,
        ),
        SeedReceptor(wither_days=config.seeds.wither_days, undo_hours=config.seeds.undo_hours),
        GovernanceReceptor(store),
        DigestReceptor(store, daily, zone=config.zone, wither_days=config.seeds.wither_days),
        ConsolidationReceptor(
            store,
            daily,
            make_extractor(config),
            zone=config.zone,
            decay_days=config.consolidation.decay_days,
            reinforce_delta=config.observation.reinforce_delta,
            similarity=config.observation.similarity,
        ),
        DailyNoteReceptor(daily, zone=config.zone),
    ]
