"""Rhythms: YAML templates for signals that fire on a schedule (the nightly consolidation is
one), and the scheduler that fires them. May import ``daemon.core`` and ``daemon.store``;
it emits through a function it is handed (the bus's), never the API, CLI or process."""

from rhythms.scheduler import RhythmScheduler
from rhythms.template import (
    RhythmTemplate,
    RhythmTemplateError,
    bundled_templates,
    latest_slot,
    load_template,
    next_slot,
)

__all__ = [
    "RhythmScheduler",
    "RhythmTemplate",
    "RhythmTemplateError",
    "bundled_templates",
    "latest_slot",
    "load_template",
    "next_slot",
]
