"""The seeds: the list (pending first), a seed's page with its target file's current text
and a diff of the proposed change, its review, and the undo of a review within
``seeds.undo_hours``. Review and undo go through the command path
(:mod:`daemon.services.commands`), as the API's do (one review at a time, the same rules,
each a signal in the log); every form carries an idempotency key, so a form sent twice is
answered by its first send. Loom never writes the target file: the person does.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from daemon.core.records import Seed
from daemon.loom.pages import PREFIX, BadField, LoomPages, Pages, see_other, segment
from daemon.loom.target import seed_target
from daemon.services.commands import Decision
from daemon.services.errors import Refused

router = APIRouter(prefix=PREFIX, include_in_schema=False)

REVIEW_SIGNALS = ("memory.seed_reviewed", "memory.seed_review_undone")


@router.get("/seeds")
async def seeds_page(loom: Pages) -> HTMLResponse:
    found = await loom.data.seeds()
    based = await loom.data.marks(sorted({m for s in found for m in s.based_on_marks}))
    return loom.page("seeds.html", seeds=found, marks={m.id: m for m in based})


@router.get("/seeds/{seed_id}")
async def seed_page(seed_id: str, request: Request, loom: Pages) -> HTMLResponse:
    seed = await loom.data.seed(seed_id)
    if seed is None:
        return loom.error(404, "No such seed", f"there is no seed {seed_id}")
    review_id = request.query_params.get("signal")
    review = await loom.data.signal(review_id) if review_id else None
    if review is not None and (
        review["type"] not in REVIEW_SIGNALS or review["payload"].get("seed_id") != seed.id
    ):
        review = None  # only this seed's own review or undo is reported on its page
    based = await loom.data.marks(seed.based_on_marks)
    target = await anyio.to_thread.run_sync(seed_target, loom.services.memory.substrate, seed)
    until = _undo_until(loom, seed)
    return loom.page(
        "seed.html",
        seed=seed,
        marks={m.id: m for m in based},
        review=review,
        target=target,
        undo_until=until,
        undoable=until is not None and loom.services.clock() <= until,
        undo_hours=loom.services.seed_rules.undo_hours,
    )


def _undo_until(loom: LoomPages, seed: Seed) -> datetime | None:
    """Until when the seed's review can be undone; None if it has no review."""
    if seed.state not in ("accepted", "rejected") or seed.reviewed_at is None:
        return None
    return seed.reviewed_at + timedelta(hours=loom.services.seed_rules.undo_hours)


@router.post("/seeds/{seed_id}/review")
async def review_seed(seed_id: str, request: Request, loom: Pages) -> Response:
    signed = await loom.signed_form(request, "reviewer", "Bad review")
    if isinstance(signed, HTMLResponse):
        return signed
    try:
        decision = _decision(signed.form.get("decision", ""))
    except BadField as exc:
        return loom.error(422, "Bad review", str(exc))
    commands = loom.services.commands
    try:
        outcome = await commands.review(
            seed_id, decision, signed.who, source="loom", key=signed.key
        )
    except Refused as exc:
        return loom.refused("Not reviewed", exc)
    return see_other(f"/seeds/{segment(seed_id)}", signal=outcome.signal_id)


@router.post("/seeds/{seed_id}/undo")
async def undo_review(seed_id: str, request: Request, loom: Pages) -> Response:
    signed = await loom.signed_form(request, "reviewer", "Bad undo")
    if isinstance(signed, HTMLResponse):
        return signed
    try:
        outcome = await loom.services.commands.undo_review(seed_id, signed.who, signed.key)
    except Refused as exc:
        return loom.refused("Not undone", exc)
    return see_other(f"/seeds/{segment(seed_id)}", signal=outcome.signal_id)


def _decision(value: str) -> Decision:
    decisions: tuple[Decision, ...] = ("accepted", "rejected")
    for decision in decisions:
        if value == decision:
            return decision
    raise BadField(f"decision: must be one of {', '.join(decisions)} (got {value[:40]!r})")
