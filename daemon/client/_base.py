"""The client without I/O: where the daemon listens, each API operation as a :class:`Call`
(what to send, how to read the answer) and the errors for what came back, shared by
:class:`~daemon.client.Client` and :class:`~daemon.client.AsyncClient`, so the two differ
only in how they wait for the network."""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, TypeAdapter, ValidationError

from daemon.client._errors import CambiumError, NotReachable, OutcomeUnknown, Rejected
from daemon.config_file import socket_path
from daemon.core.clock import SECONDS_PER_DAY
from daemon.core.errors import FieldError, describe, field_errors
from daemon.core.signal import Signal, SignalRejected
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
from daemon.schema.recall import ContextQuery, RecallQuery
from daemon.schema.waits import DELIVERY_WAIT_SECONDS, MAX_WAIT_SECONDS

T = TypeVar("T")
Q = TypeVar("Q", bound=RecallQuery)
Decision = Literal["accepted", "rejected"]

# Seconds the daemon gets to answer, on top of any delivery wait the call asks for.
ANSWER_SECONDS = 10.0
DEFAULT_SOURCE_ID = "python-client"


@dataclass(frozen=True)
class Endpoint:
    """Where the daemon listens: its socket, or a loopback ``url`` with ``headers`` (the
    bearer token); ``where`` names it in messages."""

    socket: Path | None
    url: str | None
    headers: dict[str, str]
    where: str


def endpoint(
    socket: str | Path | None, url: str | None, token: str | None, config: Path | None
) -> Endpoint:
    if url is not None:
        host = urlsplit(url).hostname or ""
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:  # the token must never leave the machine
            raise ValueError(f"url must be a loopback address, like http://127.0.0.1:8765: {url}")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return Endpoint(None, url, headers, url)
    if socket is None:
        socket = socket_path(config)
    return Endpoint(Path(socket), None, {}, str(socket))


class BaseClient:
    """What both clients hold: where the daemon is, who writes, how long it may take."""

    def __init__(self, where: str, source_id: str, answer_seconds: float) -> None:
        self.where = where
        self.source_id = source_id
        self.answer_seconds = answer_seconds

    def _emit_call(
        self,
        signal_type: str,
        payload: dict[str, Any],
        source_id: str | None,
        wait: float,
        allow_unrouted: bool = False,
        **fields: Any,
    ) -> Call[Emitted]:
        signal = build_signal(signal_type, payload, source_id=source_id or self.source_id, **fields)
        return emit(signal, wait, allow_unrouted=allow_unrouted)


def new_idempotency_key() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[Any], T]
    params: dict[str, Any] | None = None
    body: Any = None
    wait: float = 0.0  # seconds the daemon may spend on deliveries before answering
    idempotency_key: str | None = None  # set on writes: a lost answer is OutcomeUnknown


def _model(model: type[BaseModel]) -> Callable[[Any], Any]:
    return model.model_validate


def _segment(value: str) -> str:
    """``value`` as one path segment: an id cannot reach another route."""
    return quote(value, safe="")


# -- reads -------------------------------------------------------------------------------


def health() -> Call[Health]:
    return Call("GET", "/v1/health", _model(Health))


def signal(signal_id: str) -> Call[StoredSignal]:
    return Call("GET", f"/v1/signals/{_segment(signal_id)}", _model(StoredSignal))


def mark(mark_id: str) -> Call[dict[str, Any]]:
    return Call("GET", f"/v1/marks/{_segment(mark_id)}", dict)


def changes(since: datetime | str) -> Call[dict[str, Any]]:
    instant = since if isinstance(since, str) else since.isoformat()
    return Call("GET", "/v1/changes", dict, params={"since": instant})


def query(model: type[Q], arguments: dict[str, Any]) -> Q:
    """A recall (or context) query from a method's arguments, named as the query's fields
    (``None``: the default); checked here first, so a bad one fails the same whether or not
    the daemon runs."""
    given = {k: v for k, v in arguments.items() if k in model.model_fields and v is not None}
    try:
        return model.model_validate(given)
    except ValidationError as exc:
        errors = field_errors(exc.errors())
        raise Rejected(422, describe(errors), errors) from None


def recall(query: RecallQuery) -> Call[Recall]:
    return Call("GET", "/v1/recall", _model(Recall), params=query.to_params())


def context(query: ContextQuery) -> Call[ContextBlock]:
    return Call("GET", "/v1/context", _model(ContextBlock), params=query.to_params())


_SEEDS = TypeAdapter(list[SeedItem])


def seeds(state: str | None) -> Call[list[SeedItem]]:
    return Call(
        "GET", "/v1/seeds", _SEEDS.validate_python, params={"state": state} if state else None
    )


# -- writes ------------------------------------------------------------------------------


def emit(signal: dict[str, Any], wait: float, *, allow_unrouted: bool = False) -> Call[Emitted]:
    """Store ``signal`` (checked here first, so bad input fails the same whether or not the
    daemon runs; its payload against its receptor's contract by the daemon, which knows
    its receptors). Without an ``idempotency_key`` it gets a fresh one."""
    signal = {"idempotency_key": new_idempotency_key()} | {
        k: v for k, v in signal.items() if v is not None
    }
    try:
        Signal.parse(signal)
    except SignalRejected as exc:
        raise Rejected(422, str(exc), exc.errors) from None
    key = signal["idempotency_key"]

    def read(body: Any) -> Emitted:
        return Emitted.model_validate(body | {"idempotency_key": key})

    params = {"wait": _bounded_wait(wait)} if wait else None
    body = signal | {"allow_unrouted": True} if allow_unrouted else signal
    return Call("POST", "/v1/signals", read, params, body, wait, key)


def build_signal(
    signal_type: str,
    payload: dict[str, Any],
    *,
    source_id: str,
    source_layer: str | None = None,
    intensity: float | None = None,
    decay_days: float | None = None,
    affinity: Sequence[str] | None = None,
    workspace: str | None = None,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    return {
        "type": signal_type,
        "source_id": source_id,
        "source_layer": source_layer,
        "payload": payload,
        "intensity": intensity,
        "decay_rate": decay_days * SECONDS_PER_DAY if decay_days is not None else None,
        "affinity": list(affinity) if affinity else None,
        "workspace_id": workspace,
        "idempotency_key": idempotency_key,
    }


def observation_payload(
    subject: str,
    observation: str,
    evidence: dict[str, Any] | None,
    source_id: str,
    substrate_refs: Sequence[str] | None,
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "subject": subject,
        "observation": observation,
        "evidence": evidence or {"note": f"observed by {source_id}"},
    }
    if substrate_refs:
        payload["substrate_refs"] = list(substrate_refs)
    return payload


def note_payload(text: str, day: date | str | None) -> dict[str, Any]:
    payload: dict[str, Any] = {"text": text}
    if day is not None:
        payload["date"] = day if isinstance(day, str) else day.isoformat()
    return payload


def seed_payload(
    subject: str, proposed_change: str, target_file: str, based_on_marks: Sequence[str] | None
) -> dict[str, Any]:
    return {
        "subject": subject,
        "proposed_change": proposed_change,
        "target_file": target_file,
        "based_on_marks": list(based_on_marks or []),
    }


def retry(signal_id: str, wait: float) -> Call[Retried]:
    """Deliver a signal's dead deliveries again. Its id is its key: a repeat revives
    nothing new (409 when none is dead)."""
    params = {"wait": _bounded_wait(wait)} if wait else None
    path = f"/v1/signals/{_segment(signal_id)}/retry"
    return Call("POST", path, _model(Retried), params, None, wait, signal_id)


def discard(
    signal_id: str | None, receptor: str | None, every: bool, by: str, idempotency_key: str | None
) -> Call[Discard]:
    """Give up on dead deliveries: a signal's (to ``receptor``, or to all), or with
    ``every`` all of ``receptor``'s."""
    key = idempotency_key or new_idempotency_key()
    body: dict[str, Any] = {"by": by, "all": every, "idempotency_key": key}
    body |= {k: v for k, v in {"signal_id": signal_id, "receptor": receptor}.items() if v}
    return Call(
        "POST", "/v1/signals/discard", _model(Discard), None, body, DELIVERY_WAIT_SECONDS, key
    )


def review(
    seed_id: str, decision: str, reviewer: str, idempotency_key: str | None
) -> Call[Reviewed]:
    key = idempotency_key or new_idempotency_key()
    body = {"decision": decision, "reviewer": reviewer, "idempotency_key": key}
    path = f"/v1/seeds/{_segment(seed_id)}/review"
    return Call("POST", path, _model(Reviewed), None, body, DELIVERY_WAIT_SECONDS, key)


def governance(
    path: str, body: dict[str, Any], idempotency_key: str | None
) -> Call[dict[str, Any]]:
    """A correction, retraction, forget or review undo: POST ``body`` to ``path``; the answer
    is the route's JSON (``signal_id`` and the changed records)."""
    key = idempotency_key or new_idempotency_key()
    return Call(
        "POST", path, dict, None, body | {"idempotency_key": key}, DELIVERY_WAIT_SECONDS, key
    )


def correct(
    mark_id: str, text: str, reason: str, by: str, idempotency_key: str | None
) -> Call[dict[str, Any]]:
    body = {"text": text, "reason": reason, "by": by}
    return governance(f"/v1/marks/{_segment(mark_id)}/correct", body, idempotency_key)


def retract(
    mark_id: str, reason: str, by: str, idempotency_key: str | None
) -> Call[dict[str, Any]]:
    body = {"reason": reason, "by": by}
    return governance(f"/v1/marks/{_segment(mark_id)}/retract", body, idempotency_key)


def forget(
    subject: str | None, mark_id: str | None, reason: str, by: str, idempotency_key: str | None
) -> Call[dict[str, Any]]:
    target = {"subject": subject} if subject is not None else {"mark_id": mark_id or ""}
    return governance("/v1/forget", target | {"reason": reason, "by": by}, idempotency_key)


def undo_review(seed_id: str, reviewer: str, idempotency_key: str | None) -> Call[dict[str, Any]]:
    path = f"/v1/seeds/{_segment(seed_id)}/undo"
    return governance(path, {"reviewer": reviewer}, idempotency_key)


def _bounded_wait(wait: float) -> float:
    if not 0 <= wait <= MAX_WAIT_SECONDS:
        raise Rejected(
            422,
            f"wait: must be 0..{MAX_WAIT_SECONDS:g} seconds",
            [FieldError(field="wait", message=f"must be 0..{MAX_WAIT_SECONDS:g} seconds")],
        )
    return wait


# -- answers -----------------------------------------------------------------------------


def failure(call: Call[Any], sent: bool, cause: str, where: str) -> CambiumError:
    """The error for a call whose answer never came: ``sent`` whether the request may have
    reached the daemon, ``cause`` what failed."""
    if not sent:
        return NotReachable(f"daemon not reachable at {where} — start it with `cambium run`")
    if call.idempotency_key is None:
        return NotReachable(f"the daemon at {where} did not answer ({cause})")
    return OutcomeUnknown(
        f"sent to the daemon at {where}, but no answer came ({cause}); "
        f"it may be stored: send it again with idempotency key {call.idempotency_key}",
        call.idempotency_key,
    )
