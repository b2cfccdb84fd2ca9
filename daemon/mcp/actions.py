"""What each tool does, through :class:`daemon.client.AsyncClient`, and how its answer reads
for a model."""

from __future__ import annotations

import json
from typing import Any

from daemon.client import AsyncClient, Emitted
from daemon.mcp.arguments import (
    ChangesArgs,
    ContextArgs,
    CorrectArgs,
    DiscardArgs,
    ForgetArgs,
    GetMarkArgs,
    ListSeedsArgs,
    NoteArgs,
    ObserveArgs,
    PlantSeedArgs,
    RecallArgs,
    WriteOptions,
)
from daemon.schema.waits import DELIVERY_WAIT_SECONDS


class ToolFailure(Exception):
    """A failure to report to the model as a tool error."""


async def recall(client: AsyncClient, args: RecallArgs) -> str:
    found = await client.recall(**args.model_dump())
    return json.dumps(found.model_dump(mode="json"), ensure_ascii=False, indent=1)


async def context(client: AsyncClient, args: ContextArgs) -> str:
    block = await client.context(**args.model_dump(exclude={"summary"}))
    return block.text


def options(args: WriteOptions) -> dict[str, Any]:
    return {
        "intensity": args.intensity,
        "decay_days": args.decay_days,
        "idempotency_key": args.idempotency_key,
        "wait": DELIVERY_WAIT_SECONDS,
    }


async def outcome(client: AsyncClient, answer: Emitted, what: str) -> str:
    """What a write did, or an error naming why its delivery failed."""
    if answer.dead:
        stored = await client.signal(answer.id)
        errors = "; ".join(f"{d.last_error}" for d in stored.deliveries if d.status == "dead")
        raise ToolFailure(f"the memory refused it: {errors} (signal {answer.id})")
    state = "stored earlier (same idempotency key)" if answer.duplicate else "stored"
    if answer.pending:
        state += ", not applied yet"
    return f"{what}: {state}. signal {answer.id}, idempotency key {answer.idempotency_key}"


async def observe(client: AsyncClient, args: ObserveArgs) -> str:
    answer = await client.observe(
        args.subject,
        args.observation,
        evidence=args.evidence.model_dump(exclude_defaults=True) if args.evidence else None,
        substrate_refs=args.substrate_refs,
        affinity=args.affinity,
        **options(args),
    )
    said = await outcome(client, answer, f"observation about {args.subject}")
    if answer.mark is not None:
        verb = "made mark" if answer.mark.outcome == "made" else "reinforced mark"
        said += f"; {verb} {answer.mark.id}"
    return said


async def note(client: AsyncClient, args: NoteArgs) -> str:
    answer = await client.note(args.text, day=args.date, **options(args))
    return await outcome(client, answer, "note in the daily log")


async def plant_seed(client: AsyncClient, args: PlantSeedArgs) -> str:
    answer = await client.plant_seed(
        args.subject,
        args.proposed_change,
        args.target_file,
        based_on_marks=args.based_on_marks,
        **options(args),
    )
    return await outcome(client, answer, f"seed for {args.target_file}, waiting for review")


async def correct(client: AsyncClient, args: CorrectArgs) -> str:
    answer = await client.correct(
        args.mark_id, args.text, reason=args.reason, idempotency_key=args.idempotency_key
    )
    return json.dumps(answer, ensure_ascii=False, indent=1)


async def forget(client: AsyncClient, args: ForgetArgs) -> str:
    answer = await client.forget(
        reason=args.reason,
        subject=args.subject,
        mark_id=args.mark_id,
        idempotency_key=args.idempotency_key,
    )
    return json.dumps(answer, ensure_ascii=False, indent=1)


async def list_seeds(client: AsyncClient, args: ListSeedsArgs) -> str:
    found = await client.seeds(args.state)
    return json.dumps([s.model_dump(mode="json") for s in found], ensure_ascii=False, indent=1)


async def get_mark(client: AsyncClient, args: GetMarkArgs) -> str:
    return json.dumps(await client.mark(args.mark_id), ensure_ascii=False, indent=1)


async def recent_changes(client: AsyncClient, args: ChangesArgs) -> str:
    return json.dumps(await client.changes(args.since), ensure_ascii=False, indent=1)


async def discard(client: AsyncClient, args: DiscardArgs) -> str:
    answer = await client.discard(
        args.signal_id,
        receptor=args.receptor,
        every=args.all,
        idempotency_key=args.idempotency_key,
    )
    return json.dumps(answer.model_dump(mode="json"), ensure_ascii=False, indent=1)
