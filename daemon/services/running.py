"""The running daemon as its doors (the API's routes, Loom's pages) see it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from daemon.bus import SignalBus
from daemon.config import SeedsConfig
from daemon.core.clock import Clock
from daemon.services.commands import Commands
from daemon.services.recall import Memory


@dataclass
class Services:
    """What the doors read from (the bus's store, the layers) and run commands through."""

    bus: SignalBus
    memory: Memory
    clock: Clock
    next_fires: Callable[[], dict[str, datetime | None]] = dict
    started: float = field(default_factory=time.monotonic)
    seed_rules: SeedsConfig = field(default_factory=SeedsConfig)
    commands: Commands = field(init=False)

    def __post_init__(self) -> None:
        self.commands = Commands(self.bus, self.memory.workspace, self.clock, self.seed_rules)
