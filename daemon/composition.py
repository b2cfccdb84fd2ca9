"""The composition root: what the daemon is made of, built from its config in one place.

The memory's layers, the receptors (and consolidation's extractor), the bus, the rhythm
scheduler, the command path and the app (the API with Loom's pages mounted beside it,
behind the body limit; the TCP door behind the token too). Nothing here runs:
:mod:`daemon.process` runs what :func:`compose` built (sockets, lifetimes, signals,
sd_notify). Everything that can be refused is refused here, before anything is touched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp

from daemon.api.app import create_app
from daemon.api.guards import BodyLimit, RequireToken
from daemon.bus import Receptor, RetryPolicy, SignalBus
from daemon.config import Config, ConfigError
from daemon.core.clock import Clock
from daemon.files.daily import DailyLog
from daemon.loom.routes import mount_loom
from daemon.services.mark_search import MarkSearch
from daemon.services.recall import Memory
from daemon.services.running import Services
from daemon.store import Store
from receptors.consolidation import ConsolidationReceptor
from receptors.daily_note import DailyNoteReceptor
from receptors.digest import DigestReceptor
from receptors.discards import DiscardReceptor
from receptors.extractors import Extractor, MockExtractor
from receptors.governance import GovernanceReceptor
from receptors.observation import ObservationReceptor
from receptors.seeds import SeedReceptor
from rhythms.scheduler import RhythmScheduler


def _openai(config: Config) -> Extractor:
    # Imported here: the HTTP client is loaded only by a daemon configured to use it.
    from daemon.llm import chat_client
    from receptors.llm.extractor import OpenAIExtractor

    return OpenAIExtractor(
        chat_client(config.llm),
        max_lines_per_call=config.llm.max_lines_per_call,
        overlap_lines=config.llm.overlap_lines,
        max_attempts=config.llm.max_attempts,
        similarity=config.observation.similarity,
    )


EXTRACTORS: dict[str, Callable[[Config], Extractor]] = {
    "mock": lambda config: MockExtractor(),
    "openai": _openai,
}


def make_extractor(config: Config) -> Extractor:
    """The configured extractor (``[consolidation] extractor``). Raises ValueError naming the
    problem (an unknown name, an API key that cannot be read)."""
    name = config.consolidation.extractor
    try:
        factory = EXTRACTORS[name]
    except KeyError:
        raise ValueError(
            f"unknown extractor {name!r}; known: {', '.join(sorted(EXTRACTORS))}"
        ) from None
    return factory(config)


def build_receptors(
    config: Config, store: Store, daily: DailyLog, mark_search: MarkSearch | None = None
) -> list[Receptor]:
    """The daemon's receptors, configured. Raises ValueError for an unknown extractor or an
    LLM key that cannot be read."""
    return [
        ObservationReceptor(
            reinforce_delta=config.observation.reinforce_delta,
            similarity=config.observation.similarity,
        ),
        SeedReceptor(wither_days=config.seeds.wither_days, undo_hours=config.seeds.undo_hours),
        GovernanceReceptor(store, daily, mark_search),
        DiscardReceptor(),
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


def build_app(services: Services, max_request_bytes: int) -> ASGIApp:
    """The API with Loom's pages beside it, as the Unix socket serves them."""
    app = create_app(services)
    mount_loom(app, services)
    return BodyLimit(app, max_request_bytes)


@dataclass
class Daemon:
    """The daemon's parts, built and not yet running: the store is not started, the bus
    and the scheduler not entered, nothing listens."""

    store: Store
    memory: Memory
    bus: SignalBus
    scheduler: RhythmScheduler
    services: Services
    socket_app: ASGIApp  # the Unix socket's (the directory's mode guards it)
    tcp_app: ASGIApp  # loopback TCP's: the same behind the bearer token


def compose(config: Config, clock: Clock) -> Daemon:
    """Build the daemon from ``config``. Raises ConfigError naming the key at fault."""
    templates = config.rhythm_templates()
    token = config.ingress.read_token()
    store = Store(config.store.url)
    # ConfigError: semantic without its model.
    memory = Memory.from_config(config, store, daemon=True)
    try:
        receptors = build_receptors(config, store, memory.daily, memory.mark_search)
    except ValueError as exc:
        raise ConfigError(f"consolidation.extractor: {exc}") from None
    known = [r.key for r in receptors]
    unknown = sorted(set(config.bus.receptors or ()) - set(known))
    if unknown:
        raise ConfigError(
            f"bus.receptors: unknown receptor {', '.join(unknown)} (known: {', '.join(known)})"
        )
    bus = SignalBus(
        store,
        receptors,
        workspace=config.workspace,
        retry=RetryPolicy(max_attempts=config.bus.max_attempts),
        clock=clock,
        grace_period=config.bus.grace_period,
        may_own=config.bus.receptors,
        lease_seconds=config.bus.lease_seconds,
    )
    scheduler = RhythmScheduler(templates, bus.emit, store, clock=clock)
    services = Services(
        bus=bus,
        memory=memory,
        clock=clock,
        next_fires=lambda: scheduler.rhythms,
        seed_rules=config.seeds,
    )
    app = build_app(services, config.ingress.max_request_bytes)
    return Daemon(store, memory, bus, scheduler, services, app, RequireToken(app, token or ""))
