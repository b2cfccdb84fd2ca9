"""A person's command: review a seed, undo a review, correct, retract or forget a mark,
discard dead deliveries. One path for every door (the API, and through it the CLI and MCP;
Loom's forms), so each command is checked, recorded and answered the same way:

1. A repeat of a request with the same idempotency key gets the first one's outcome (its
   signal id is derived from the key), not a refusal.
2. The rules (:mod:`daemon.services.review`, :mod:`daemon.services.governance`) are checked
   first, so a refusal comes at once and nothing is stored.
3. The command is emitted as a ``human`` signal (the log stays the audit trail) and the
   receptor that applies it is waited for, up to ``DELIVERY_WAIT_SECONDS``.

The answer is an :class:`Outcome` (applied, or stored and not applied yet); a refusal is a
domain error (:mod:`daemon.services.errors`): the receptor refusing the delivery is a
:class:`~daemon.services.errors.Conflict` carrying its error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from daemon.bus import SignalBus
from daemon.config import SeedsConfig
from daemon.core import signal_types
from daemon.core.clock import Clock
from daemon.schema.waits import DELIVERY_WAIT_SECONDS
from daemon.services.errors import Conflict, NotFound
from daemon.services.governance import ForgetTarget, Forgetting, standing, to_forget
from daemon.services.review import reviewable, undoable
from daemon.store import Tx

Decision = Literal["accepted", "rejected"]


def keyed_signal_id(namespace: str, idempotency_key: str) -> str:
    """32 hex digits derived from the key: a repeated request is known by its signal id."""
    return hashlib.sha256(f"{namespace}:{idempotency_key}".encode()).hexdigest()[:32]


async def delivery_status(bus: SignalBus, signal_id: str, wait: float) -> dict[str, str]:
    """Each receptor's delivery status for the signal, after waiting up to ``wait`` seconds
    for none to be pending."""
    with anyio.move_on_after(wait):
        return await bus.settled(signal_id)
    return await bus.store.read(lambda tx: tx.signals.status(signal_id))


@dataclass(frozen=True)
class Outcome:
    """The command's signal, and whether its receptor applied it within the wait (if not,
    it is stored and will be)."""

    signal_id: str
    applied: bool


@dataclass(frozen=True)
class Forgotten(Outcome):
    """A forget's outcome, with the texts and subjects it erased: what to look for in the
    person's live daily files, which are theirs to edit (never sent anywhere else)."""

    mentions: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Command:
    signal_type: str
    payload: dict[str, Any]
    by: str  # the signal's source_id
    receptor: str  # the one that applies it
    rule: Callable[[Tx], object]  # raises the refusal, checked before anything is stored
    key: str | None = None
    # What an idempotency key is hashed with; reviews keep the namespace they always had,
    # so a key sent before still finds its signal.
    key_namespace: str = ""

    @property
    def keyed_id(self) -> str | None:
        if self.key is None:
            return None
        return keyed_signal_id(self.key_namespace or self.signal_type, self.key)


@dataclass
class Commands:
    """Runs a person's commands against the running bus, for one workspace."""

    bus: SignalBus
    workspace: str
    clock: Clock
    seed_rules: SeedsConfig = field(default_factory=SeedsConfig)
    # One review at a time: two people reviewing the same seed at once get an answer and a
    # refusal, not a dead delivery that looks like work left to do.
    reviewing: anyio.Lock = field(default_factory=anyio.Lock)
    # Likewise one correction, retraction or forget at a time.
    governing: anyio.Lock = field(default_factory=anyio.Lock)

    async def review(
        self,
        seed_id: str,
        decision: Decision,
        reviewer: str,
        *,
        source: str = "review",
        key: str | None = None,
    ) -> Outcome:
        """Accept or reject a pending seed. Unlike the other commands the rule is checked
        first: a repeat is known only once the seed is no longer pending."""
        now, wither_days = self.clock(), self.seed_rules.wither_days
        command = _Command(
            signal_types.SEED_REVIEWED,
            {"seed_id": seed_id, "decision": decision, "reviewer": reviewer},
            source,
            "seeds",
            lambda tx: reviewable(tx, self.workspace, seed_id, now, wither_days),
            key,
            key_namespace="review",
        )
        async with self.reviewing:
            try:
                await self.bus.store.read(command.rule)
            except Conflict:
                if command.keyed_id and await self._stored(command.keyed_id):
                    return Outcome(command.keyed_id, applied=True)
                raise
            return await self._emit(command)

    async def undo_review(self, seed_id: str, reviewer: str, key: str | None = None) -> Outcome:
        """Make a reviewed seed pending again, within ``seeds.undo_hours`` of its review."""
        now, hours = self.clock(), self.seed_rules.undo_hours
        command = _Command(
            signal_types.SEED_REVIEW_UNDONE,
            {"seed_id": seed_id, "reviewer": reviewer},
            reviewer,
            "seeds",
            lambda tx: undoable(tx, self.workspace, seed_id, now, hours),
            key,
        )
        async with self.reviewing:
            return await self._run(command)

    async def correct(
        self, mark_id: str, text: str, reason: str, by: str, key: str | None = None
    ) -> Outcome:
        """Supersede a standing mark with one saying ``text``."""
        return await self._govern(
            signal_types.MARK_CORRECTED,
            {"mark_id": mark_id, "text": text, "reason": reason},
            by,
            lambda tx: standing(tx, self.workspace, mark_id),
            key,
        )

    async def retract(self, mark_id: str, reason: str, by: str, key: str | None = None) -> Outcome:
        """End a standing mark, keeping its history."""
        return await self._govern(
            signal_types.MARK_RETRACTED,
            {"mark_id": mark_id, "reason": reason},
            by,
            lambda tx: standing(tx, self.workspace, mark_id),
            key,
        )

    async def forget(
        self, target: ForgetTarget, reason: str, by: str, key: str | None = None
    ) -> Forgotten:
        """Erase every copy of a subject's marks, or of one mark and its corrections; with
        what the person's own daily files may still hold of them (read before the forget)."""
        named = {"subject": target.subject, "mark_id": target.mark_id}
        found: list[Forgetting] = []

        def rule(tx: Tx) -> None:
            found.append(to_forget(tx, self.workspace, target, reason))

        outcome = await self._govern(
            signal_types.FORGET,
            {k: v for k, v in named.items() if v is not None} | {"reason": reason},
            by,
            rule,
            key,
        )
        if not found:  # a repeat: answered by the first forget, nothing left to mention
            return Forgotten(outcome.signal_id, outcome.applied)
        words = {m.observation for m in found[0].marks} | found[0].subjects
        return Forgotten(outcome.signal_id, outcome.applied, tuple(sorted(words)))

    async def discard(
        self, signal_id: str | None, receptor: str | None, by: str, key: str | None = None
    ) -> Outcome:
        """Give up for good on a signal's dead deliveries (to ``receptor``, or to every
        one), or on all of ``receptor``'s. A signal's discard is keyed by what it names, so
        asking again is answered with the first outcome."""
        if key is None and signal_id is not None:
            key = f"{signal_id}/{receptor or '*'}"
        named = {"signal_id": signal_id, "receptor": receptor}

        def rule(tx: Tx) -> None:
            if not tx.signals.count_dead(signal_id, receptor):
                which = " ".join(f"{k.replace('_', ' ')} {v}" for k, v in named.items() if v)
                raise NotFound(f"no dead delivery to discard ({which})")

        command = _Command(
            signal_types.DELIVERY_DISCARDED,
            {k: v for k, v in named.items() if v is not None},
            by,
            "discards",
            rule,
            key,
        )
        async with self.governing:
            return await self._run(command)

    async def _govern(
        self,
        signal_type: str,
        payload: dict[str, Any],
        by: str,
        rule: Callable[[Tx], object],
        key: str | None,
    ) -> Outcome:
        async with self.governing:
            return await self._run(_Command(signal_type, payload, by, "governance", rule, key))

    async def _run(self, command: _Command) -> Outcome:
        """A repeat gets the first request's outcome; otherwise check, emit and wait."""
        if command.keyed_id and await self._stored(command.keyed_id):
            return await self._outcome(command, command.keyed_id)
        await self.bus.store.read(command.rule)
        return await self._emit(command)

    async def _emit(self, command: _Command) -> Outcome:
        keyed = {"id": command.keyed_id, "idempotency_key": command.key} if command.keyed_id else {}
        stored = await self.bus.emit_raw(
            {
                "type": command.signal_type,
                "source_id": command.by,
                "source_layer": "human",
                "workspace_id": self.workspace,
                "payload": command.payload,
            }
            | keyed
        )
        return await self._outcome(command, stored.id)

    async def _outcome(self, command: _Command, signal_id: str) -> Outcome:
        status = await delivery_status(self.bus, signal_id, DELIVERY_WAIT_SECONDS)
        if status.get(command.receptor) == "dead":
            found = await self.bus.store.read(lambda tx: tx.signals.get(signal_id))
            error = found.deliveries[0].last_error if found and found.deliveries else None
            raise Conflict(error or f"{command.signal_type} refused")
        return Outcome(signal_id, applied=status.get(command.receptor) == "delivered")

    async def _stored(self, signal_id: str) -> bool:
        return await self.bus.store.read(lambda tx: tx.signals.get(signal_id)) is not None
