"""Receptors: what the bus delivers signals to. One module per receptor. May import
services and everything below them; never the API, the CLI or the process. The daemon's
set is built from the config by :func:`daemon.composition.build_receptors`.

| signal type                                   | receptor (key)                |
|-----------------------------------------------|-------------------------------|
| ``memory.observation``                        | observation                   |
| ``memory.seed_planted``, ``memory.seed_reviewed``, ``memory.seed_review_undone`` | seeds |
| ``memory.mark_corrected``, ``memory.mark_retracted``, ``memory.forget`` | governance |
| ``memory.seed_digest`` (weekly rhythm)        | digest                        |
| ``memory.consolidate``                        | consolidation                 |
| ``memory.daily_note``                         | daily                         |
| ``memory.delivery_discarded``                 | discards                      |
"""
