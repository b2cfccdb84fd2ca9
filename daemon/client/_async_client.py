"""The asynchronous client (see :mod:`daemon.client`): :class:`~daemon.client.Client`'s
methods, awaited."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from daemon.client import _base as calls
from daemon.client._base import DEFAULT_SOURCE_ID, BaseClient, Decision
from daemon.client._wire import Answer
from daemon.core import signal_types
from daemon.schema.answers import (
    ContextBlock,
    Discard,
    Emitted,
    Health,
    Recall,
    Retried,
    Reviewed,
    SeedItem,
    StoredSignal,
)
from daemon.schema.fields import Provenance
from daemon.schema.recall import DEFAULT_CHARS, ContextQuery, Layer, RecallQuery

T = TypeVar("T")

_BASE_URL = "http://cambium"
# Failures before the request left: nothing can have been stored.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


class AsyncClient(BaseClient):
    """The same as :class:`~daemon.client.Client`, for async code (asyncio or trio through
    anyio)."""

    def __init__(
        self,
        socket: str | Path | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        config: Path | None = None,
        source_id: str = DEFAULT_SOURCE_ID,
        answer_seconds: float = calls.ANSWER_SECONDS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if transport is not None:  # its own settings stand
            where = calls.Endpoint(None, url or _BASE_URL, {}, "the given transport")
        else:
            where = calls.endpoint(socket, url, token, config)
            transport = httpx.AsyncHTTPTransport(
                uds=None if where.socket is None else str(where.socket),
                # Plain HTTP to this machine never speaks TLS: httpx builds a bare context
                # for verify=False (under a millisecond) instead of loading the CA bundle.
                verify=where.url is not None and where.url.startswith("https:"),
            )
        super().__init__(where.where, source_id, answer_seconds)
        self._http = httpx.AsyncClient(
            transport=transport,
            base_url=where.url or _BASE_URL,
            headers=where.headers,
            trust_env=False,  # an HTTP(S)_PROXY must not take the daemon's requests elsewhere
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _run(self, call: calls.Call[T]) -> T:
        try:
            response = await self._http.request(
                call.method,
                call.path,
                params=call.params,
                json=call.body,
                timeout=call.wait + self.answer_seconds,
            )
        except _NOT_SENT as exc:
            raise calls.failure(call, False, type(exc).__name__, self.where) from None
        except httpx.TransportError as exc:
            raise calls.failure(call, True, type(exc).__name__, self.where) from None
        answer = Answer(response.status_code, response.reason_phrase, response.content)
        return call.read(answer.json())

    # reads

    async def health(self) -> Health:
        return await self._run(calls.health())

    async def signal(self, signal_id: str) -> StoredSignal:
        return await self._run(calls.signal(signal_id))

    async def recall(
        self,
        about: str = "",
        *,
        layers: Sequence[Layer] | None = None,
        horizon: str | None = None,
        min_strength: float | None = None,
        limit: int | None = None,
        include_withered: bool = False,
        include_history: bool = False,
        workspace: str | None = None,
        provenance: Sequence[Provenance] | None = None,
        summary: bool = False,
    ) -> Recall:
        """What the memory knows about ``about`` (a subject path or free text; empty: all).
        The arguments are those of :class:`daemon.schema.recall.RecallQuery`."""
        return await self._run(calls.recall(calls.query(RecallQuery, locals())))

    async def context(
        self,
        about: str = "",
        *,
        max_chars: int = DEFAULT_CHARS,
        layers: Sequence[Layer] | None = None,
        horizon: str | None = None,
        min_strength: float | None = None,
        limit: int | None = None,
        include_withered: bool = False,
        include_history: bool = False,
        workspace: str | None = None,
        provenance: Sequence[Provenance] | None = None,
    ) -> ContextBlock:
        """Recall as prompt-ready text, never longer than ``max_chars``."""
        return await self._run(calls.context(calls.query(ContextQuery, locals())))

    async def mark(self, mark_id: str) -> dict[str, Any]:
        """One mark with its evidence, reinforcements and corrections (NotFound if none)."""
        return await self._run(calls.mark(mark_id))

    async def changes(self, since: datetime | str) -> dict[str, Any]:
        """What changed since the instant ``since``: marks made, reinforced and ended,
        seeds planted and reviewed, newest first."""
        return await self._run(calls.changes(since))

    async def seeds(self, state: str | None = None) -> list[SeedItem]:
        return await self._run(calls.seeds(state))

    # writes

    async def emit(
        self,
        signal_type: str,
        payload: dict[str, Any] | None = None,
        *,
        source_id: str | None = None,
        wait: float = 0.0,
        allow_unrouted: bool = False,
        **fields: Any,
    ) -> Emitted:
        """Emit any signal. ``fields``: intensity, decay_days, affinity, workspace,
        source_layer, idempotency_key. ``wait``: seconds to wait for its deliveries.
        ``allow_unrouted``: store it even though no receptor binds its type (otherwise
        that is refused, like a payload its receptor would refuse)."""
        return await self._run(
            self._emit_call(signal_type, payload or {}, source_id, wait, allow_unrouted, **fields)
        )

    async def observe(
        self,
        subject: str,
        observation: str,
        *,
        evidence: dict[str, Any] | None = None,
        substrate_refs: Sequence[str] | None = None,
        source_id: str | None = None,
        wait: float = 0.0,
        **fields: Any,
    ) -> Emitted:
        """A mark about ``subject`` (or a reinforcement of the same one)."""
        payload = calls.observation_payload(
            subject, observation, evidence, source_id or self.source_id, substrate_refs
        )
        return await self.emit(
            signal_types.OBSERVATION, payload, source_id=source_id, wait=wait, **fields
        )

    async def note(
        self,
        text: str,
        *,
        day: date | str | None = None,
        source_id: str | None = None,
        wait: float = 0.0,
        **fields: Any,
    ) -> Emitted:
        """Append one line to a day's log (default: today in the daemon's time zone)."""
        payload = calls.note_payload(text, day)
        return await self.emit(
            signal_types.DAILY_NOTE, payload, source_id=source_id, wait=wait, **fields
        )

    async def plant_seed(
        self,
        subject: str,
        proposed_change: str,
        target_file: str,
        *,
        based_on_marks: Sequence[str] | None = None,
        source_id: str | None = None,
        wait: float = 0.0,
        **fields: Any,
    ) -> Emitted:
        """Propose a change to a substrate file, for a person to review."""
        payload = calls.seed_payload(subject, proposed_change, target_file, based_on_marks)
        return await self.emit(
            signal_types.SEED_PLANTED, payload, source_id=source_id, wait=wait, **fields
        )

    async def consolidate(
        self,
        day: date | str | None = None,
        *,
        source_id: str | None = None,
        wait: float = 0.0,
        **fields: Any,
    ) -> Emitted:
        """Consolidate a day's log now (default: yesterday)."""
        payload = {} if day is None else {"date": str(day)}
        return await self.emit(
            signal_types.CONSOLIDATE, payload, source_id=source_id, wait=wait, **fields
        )

    async def review_seed(
        self,
        seed_id: str,
        decision: Decision,
        reviewer: str,
        *,
        idempotency_key: str | None = None,
    ) -> Reviewed:
        return await self._run(calls.review(seed_id, decision, reviewer, idempotency_key))

    # governing the memory (answers: the route's JSON)

    async def correct(
        self, mark_id: str, text: str, *, reason: str, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Supersede a mark with ``text``."""
        return await self._run(
            calls.correct(mark_id, text, reason, self.source_id, idempotency_key)
        )

    async def retract(
        self, mark_id: str, *, reason: str, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """End a mark that should never have been made (it stays in the history)."""
        return await self._run(calls.retract(mark_id, reason, self.source_id, idempotency_key))

    async def forget(
        self,
        *,
        reason: str,
        subject: str | None = None,
        mark_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Erase the text of a subject's marks (or of one mark), leaving a tombstone."""
        return await self._run(
            calls.forget(subject, mark_id, reason, self.source_id, idempotency_key)
        )

    async def undo_review(
        self, seed_id: str, reviewer: str, *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Take back a seed's review (within the configured undo window)."""
        return await self._run(calls.undo_review(seed_id, reviewer, idempotency_key))

    async def discard(
        self,
        signal_id: str | None = None,
        *,
        receptor: str | None = None,
        every: bool = False,
        idempotency_key: str | None = None,
    ) -> Discard:
        """Give up for good on a signal's dead deliveries (to ``receptor``, or to every
        one), or with ``every`` on all of ``receptor``'s: they stop counting as dead and
        say who discarded them. Recorded as a signal."""
        return await self._run(
            calls.discard(signal_id, receptor, every, self.source_id, idempotency_key)
        )

    async def retry(self, signal_id: str, *, wait: float = 0.0) -> Retried:
        return await self._run(calls.retry(signal_id, wait))
