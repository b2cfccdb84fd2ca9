"""recall: what does the memory know about X? One answer blended from four layers.

- marks: segment-prefix match on the subject, or, unless the query is a dotted subject path,
  a subject or observation holding a word of the query (whole stemmed words, as the other
  layers match; a subject's segments are words); current strength at least
  ``min_strength``, last reinforced within the horizon; strongest first, then most recent.
  An empty ``about`` matches every mark.
- substrate: ranked text hits, plus every substrate file the returned marks reference.
- daily: ranked text hits in live, claimed and archived lines within the horizon (default 7
  days), plus the very log lines the returned marks cite as evidence.
- compost: learnings of retired agents, grouped and ranked.

The daily lines, the marks, the substrate's files and the compost's learnings are ranked
from the store's text index (:mod:`daemon.store.text_index`); the daemon keeps it current,
and a process that only reads the store (the CLI) reads it as it is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from zoneinfo import ZoneInfo

import structlog

from daemon.config import Config, ConfigError, LLMConfig, RecallConfig
from daemon.core.records import ENDED_MARK_STATES, Mark
from daemon.core.strength import strength
from daemon.core.text_rows import LAYERS
from daemon.files.compost import Compost
from daemon.files.daily import DailyLog
from daemon.files.substrate import Substrate, SubstrateHit
from daemon.schema.recall import RecallQuery, horizon_start
from daemon.search.daily import DailyHit, joined
from daemon.search.memory_index import MemoryTextIndex
from daemon.services.mark_search import MarkSearch
from daemon.services.recall_result import MarkHit, RecallResult
from daemon.store import Store, StoreTextIndex, Tx

if TYPE_CHECKING:  # the semantic extra is imported only when it is on
    from daemon.services.semantic_recall import SemanticRecall

T = TypeVar("T")

log = structlog.get_logger("cambium.recall")

DEFAULT_DAILY_HORIZON = timedelta(days=7)


# How often (seconds) the daemon's recall looks for daily files a person edited by hand:
# its own writes are indexed as they are made, and a look stats every file.
HAND_EDITS_LOOK = 5.0
# How often (seconds) recall looks for marks another process queued (see
# :meth:`Memory.index_new_marks`).
MARKS_LOOK = 1.0
# A recall reads at most this many changed daily files itself (a few days edited by hand,
# or while the daemon was down), and indexes at most one chunk of queued marks; more is a
# build (years of notes not indexed yet, after an import or an upgrade: a minute), which
# the daemon's preparation does in the background (see :meth:`Memory.catch_up`).
READ_IN_A_RECALL = 20


class _Stopped(Exception):
    """The daemon stops: a preparation gives up where it is."""


class _Behind(Exception):
    """More marks are queued than a recall indexes itself."""


def _one_chunk(*_: int) -> None:
    raise _Behind


@dataclass
class Memory:
    """The four layers recall reads, for one workspace."""

    store: Store
    substrate: Substrate
    daily: DailyLog
    compost: Compost
    workspace: str
    zone: ZoneInfo
    mark_search: MarkSearch = field(default_factory=MarkSearch)
    llm: LLMConfig | None = None  # the model for summaries, when one is configured
    semantic: SemanticRecall | None = None  # with [recall] semantic = true
    # Set when the daemon stops: a preparation in flight (after an upgrade, building the
    # index of years of notes takes minutes) stops at its next file or chunk.
    stopping: threading.Event = field(default_factory=threading.Event)
    # Set once a preparation has brought everything up to date (health says "ready"):
    # until then recall answers from what is indexed so far.
    prepared: threading.Event = field(default_factory=threading.Event)
    # Set while the daemon has a preparation to come or under way: a recall then answers
    # from what is indexed so far instead of bringing the index up to date itself (the
    # first after importing three years of notes took 58 s).
    preparing: threading.Event = field(default_factory=threading.Event)
    # How far the preparation is: the layer it is at, and where it says (the daily layer:
    # files looked at, of how many), for health and ``cambium status``.
    preparation: tuple[str, int, int] | None = None
    monotonic: Callable[[], float] = time.monotonic
    # This process's writer's transactions and the clock when a recall last indexed the
    # marks' queue (see :meth:`index_new_marks`).
    _marks_indexed: tuple[int, float] | None = field(default=None, init=False)
    _catching_up: threading.Lock = field(default_factory=threading.Lock, init=False)

    @classmethod
    def from_config(cls, config: Config, store: Store, *, daemon: bool = False) -> Memory:
        """The layers ``config`` describes over ``store``; ``daemon``: this process keeps
        the indexes and embeds (the daemon's embedding worker is made, not started)."""
        # A store in memory (no database yet) keeps nothing: its index would be empty.
        index = MemoryTextIndex() if store.in_memory else StoreTextIndex(store)
        parts = None if store.in_memory else semantic_recall(config.recall, store, daemon)
        daily = DailyLog(
            config.paths.daily,
            parts.lines if parts else None,
            index=index,
            look_every=HAND_EDITS_LOOK if daemon else 0.0,
        )
        mark_search = parts.mark_search() if parts else MarkSearch()
        if parts is not None and daemon:
            parts.attach(daily, mark_search)
        return cls(
            store=store,
            substrate=Substrate(
                config.paths.substrate, parts.substrate if parts else None, index=index
            ),
            daily=daily,
            compost=Compost(config.paths.compost, config.compost.templates, index=index),
            workspace=config.workspace,
            zone=config.zone,
            mark_search=mark_search,
            llm=config.llm if config.llm_configured else None,
            semantic=parts,
        )

    def prepare_search(self) -> None:
        """Bring the text index up to date (the daily, substrate and compost files that
        changed, the marks queued) ahead of the first recall; with semantic recall on, wake
        the embedding worker for what changed. Returns early, between two files or chunks
        of marks, once :attr:`stopping` is set (what was written stays: the next start
        resumes); sets :attr:`prepared` once it went through."""

        def at(layer: str) -> Callable[..., None]:
            def go_on(done: int = 0, total: int = 0) -> None:
                if self.stopping.is_set():
                    raise _Stopped
                self.preparation = (layer, done, total)

            go_on()
            return go_on

        started = self.monotonic()
        try:
            self.index_marks(at("marks"))
            self.daily.refresh(at("daily"))
            at("substrate and compost")
            self.substrate.prepare_search()
            self.compost.refresh()
            counting = at("word counts")
            for layer in LAYERS:
                counting()
                self.store.read_sync(partial(_keep_common_counts, layer))
        except _Stopped:
            return
        finally:
            self.preparing.clear()
            self.preparation = None
        self.prepared.set()
        log.info("text index up to date", seconds=round(self.monotonic() - started, 3))
        self._wake_embedding()

    def index_new_marks(self) -> None:
        """:meth:`index_marks` before a recall, unless this process's writer has run no
        transaction since the last time and that was under ``MARKS_LOOK`` seconds ago.

        Only writes queue marks: those of this process's writer are indexed before the
        next recall, those of another process (a daemon of the fleet, a command run while
        this daemon was down) within ``MARKS_LOOK`` seconds, and meanwhile a recall ranks
        what is queued (:class:`MarkSearch`), so no answer changes. What it saves is a
        write transaction (SQLite: the write lock) per recall."""
        if self.preparing.is_set():
            return  # (the preparation indexes them; meanwhile what is queued ranks)
        seen = (self.store.commits, self.monotonic())
        last = self._marks_indexed
        if last is not None and last[0] == seen[0] and seen[1] - last[1] < MARKS_LOOK:
            return
        try:
            self.index_marks(_one_chunk)
        except _Behind:  # (meanwhile what is queued ranks, as during the start's)
            self.catch_up()
        self._marks_indexed = seen

    def catch_up(self) -> None:
        """Bring the index up to date in a thread of its own, as the daemon's start does,
        unless that is under way: a recall found more to read or index than it does itself
        (three years imported into a running daemon: the next recall took 60 s). Recall
        answers from what is indexed meanwhile; health says "preparing". Only where this
        process keeps the index (the daemon)."""
        if not self.store.writer_alive:
            return
        with self._catching_up:
            if self.preparing.is_set():
                return
            self.preparing.set()
            self.prepared.clear()
        log.info("bringing the text index up to date: a recall found more to read than it does")
        threading.Thread(target=self._catch_up, name="cambium-catch-up", daemon=True).start()

    def _catch_up(self) -> None:
        try:
            self.prepare_search()
        except Exception:  # (the store failed: the next recall that finds it behind tries again)
            log.exception("bringing the text index up to date failed")

    def index_marks(self, between: Callable[[int, int], None] | None = None) -> None:
        """Index the marks queued since the last look (where this process may write); new
        rows wake the embedding worker. ``between`` is called between chunks."""
        if self.store.writer_alive and self.mark_search.index(self.store, between):
            self._wake_embedding()

    async def index_stored_marks(self) -> None:
        """:meth:`index_marks` in the bus's writer (the daemon, as its receptors store
        marks)."""
        if await self.mark_search.index_in_writer(self.store):
            self._wake_embedding()

    def foreground(self) -> AbstractContextManager[None]:
        """Recall's work, which the embedding worker's model calls make way for."""
        if self.semantic is None:
            return nullcontext()
        return self.semantic.semantic.embedder.foreground()

    def _wake_embedding(self) -> None:
        worker = None if self.semantic is None else self.semantic.worker
        if worker is not None:
            worker.wake()


def _keep_common_counts(layer: str, tx: Tx) -> None:
    tx.text_index.keep_common_counts(layer)


def semantic_recall(config: RecallConfig, store: Store, daemon: bool) -> SemanticRecall | None:
    """Hybrid recall's parts when ``[recall] semantic`` is on (see
    :func:`~daemon.services.semantic_recall.load_semantic_recall`); ``None`` when it is off."""
    if not config.semantic:
        return None
    try:
        from daemon.search.embedding import SemanticUnavailable
        from daemon.services.semantic_recall import load_semantic_recall
    except ImportError as exc:  # the optional extra is not installed
        raise ConfigError(
            f"recall.semantic: needs pip install 'cambium-memory[semantic]' ({exc})"
        ) from None
    try:
        return load_semantic_recall(config, store, daemon=daemon)
    except SemanticUnavailable as exc:
        raise ConfigError(f"recall.semantic: {exc}") from None


def recall(query: RecallQuery, memory: Memory, now: datetime) -> RecallResult:
    """Blocking (database and files): call it from a worker thread in async code."""
    with memory.foreground():
        return _recall(query, memory, now)


def _recall(query: RecallQuery, memory: Memory, now: datetime) -> RecallResult:
    since = horizon_start(query.horizon, now, memory.zone) if query.horizon else None
    daily_since = since if query.horizon else now - DEFAULT_DAILY_HORIZON
    lines_since = daily_since.astimezone(memory.zone).date() if daily_since else None
    layers = query.layers
    if memory.semantic is not None and query.about:
        # The searches by meaning run in the query thread while the lexical work runs here:
        # the layers' own searches first, the marks last.
        memory.semantic.search_ahead(
            query.about,
            lines_since=lines_since if "daily" in layers else False,
            marks_of=query.workspace or memory.workspace if "marks" in layers else None,
        )
    found_substrate = (
        memory.substrate.search(query.about, query.limit) if "substrate" in layers else []
    )
    found_daily = (
        memory.daily.search(
            query.about,
            since=lines_since,
            limit=query.limit,
            most=READ_IN_A_RECALL,
        )
        if "daily" in layers
        else []
    )
    if memory.daily.behind:
        memory.catch_up()
    compost = memory.compost.search(query.about, query.limit) if "compost" in layers else []
    marks = _marks(query, memory, now, since) if "marks" in layers else []
    # What the marks refer to and cite comes first in its layer.
    substrate: list[SubstrateHit] = []
    if "substrate" in layers:
        referenced = [
            hit
            for h in marks
            for hit in memory.substrate.referenced(h.mark.substrate_refs, h.mark.id)
        ]
        substrate = _unique(referenced + found_substrate, key=_file)
    daily: list[DailyHit] = []
    if "daily" in layers:
        evidence = [hit for h in marks if (hit := _evidence(memory.daily, h.mark)) is not None]
        daily = joined(evidence + found_daily, partial(_lines_of, memory.daily))
    return RecallResult(
        substrate=substrate,
        marks=marks,
        daily=daily,
        compost=compost,
        history=query.include_history,
        semantic=None if memory.semantic is None else memory.semantic.coverage(),
    )


def _marks(
    query: RecallQuery, memory: Memory, now: datetime, since: datetime | None
) -> list[MarkHit]:
    states: tuple[str, ...] = ("active", "promoted")
    if query.include_withered or query.include_history:
        states += ("withered",)
    if query.include_history:
        states += ENDED_MARK_STATES

    workspace = query.workspace or memory.workspace
    memory.index_new_marks()

    def read(tx: Tx) -> list[MarkHit]:
        # Under the subject prefix, or saying a word of the query.
        provenances = query.provenance
        scored = tx.marks.score(workspace, query.about, states, now, since, provenances)
        said = memory.mark_search.search(tx, workspace, query.about)
        seen = {s.mark_id for s in scored}
        if said:
            scored += [
                s
                for s in tx.marks.score_among(said, workspace, states, now, since, provenances)
                if s.mark_id not in seen
            ]
        strong = [s for s in scored if s.value >= query.min_strength]
        strong.sort(key=lambda s: (s.value, s.last_reinforced_at), reverse=True)
        best = strong[: query.limit]
        found = tx.marks.get_many([s.mark_id for s in best])
        return [MarkHit(mark, s.breakdown(now)) for mark, s in zip(found, best, strict=True)]

    return memory.store.read_sync(read)


def mark_made_by(tx: Tx, signal_id: str, now: datetime) -> MarkHit | None:
    """The mark an observation signal created or reinforced, with its strength at ``now``."""
    mark = tx.marks.made_by(signal_id)
    if mark is None:
        return None
    boosts = tx.marks.reinforcements_of([mark.id]).get(mark.id, [])
    parts = [(r.reinforced_at, r.strength_delta) for r in boosts]
    return MarkHit(
        mark,
        strength(mark.initial_strength, mark.half_life_days, mark.first_observed_at, parts, now),
    )


def _evidence(daily: DailyLog, mark: Mark) -> DailyHit | None:
    evidence = mark.evidence
    line_range = evidence.get("line_range")
    if not evidence.get("daily_file") or not line_range:
        return None
    return daily.evidence(evidence["daily_file"], (int(line_range[0]), int(line_range[1])))


def _file(hit: SubstrateHit) -> str:
    return hit.file


def _lines_of(daily: DailyLog, hit: DailyHit, span: tuple[int, int]) -> DailyHit | None:
    return daily.lines(date.fromisoformat(hit.date), hit.archived, span)


def _unique(hits: list[T], key: Callable[[T], Hashable]) -> list[T]:
    seen: set[Any] = set()
    kept = []
    for hit in hits:
        if key(hit) not in seen:
            seen.add(key(hit))
            kept.append(hit)
    return kept
