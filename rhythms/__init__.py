"""Rhythms: YAML templates for signals that fire on a schedule (the nightly consolidation is
one), and the scheduler that fires them."""

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
