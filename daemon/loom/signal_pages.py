"""The signal log: the list (each dead delivery with its error, and a button to discard
it), a signal's page, the retry of its dead deliveries (through the bus, as the API's
retry) and their discard (a person's command, through the command path, so the log says
who gave up on them and when; keyed by the form, so a form sent twice discards once).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from daemon.loom.data import SignalFilter
from daemon.loom.pages import PREFIX, BadField, Pages, choices, see_other, segment, text_field
from daemon.schema.waits import DELIVERY_WAIT_SECONDS
from daemon.services.commands import delivery_status
from daemon.services.errors import Refused

router = APIRouter(prefix=PREFIX, include_in_schema=False)

DELIVERY_STATUSES = ("pending", "delivered", "dead", "discarded", "unrouted")
SIGNAL_LIMIT = 200


@router.get("/signals")
async def signals_page(request: Request, loom: Pages) -> HTMLResponse:
    query = request.query_params
    try:
        status = query.get("status", "")
        if status:
            choices([status], DELIVERY_STATUSES, "status")
        wanted = SignalFilter(
            signal_type=text_field(query.get("type", ""), "type"),
            status=status,
            source=text_field(query.get("source", ""), "source"),
        )
    except BadField as exc:
        return loom.error(422, "Bad filter", str(exc))
    return loom.page(
        "signals.html",
        wanted=wanted,
        found=await loom.data.signals(wanted, SIGNAL_LIMIT),
        facets=await loom.data.signal_facets(),
        statuses=DELIVERY_STATUSES,
        limit=SIGNAL_LIMIT,
    )


@router.get("/signals/{signal_id}")
async def signal_page(signal_id: str, request: Request, loom: Pages) -> HTMLResponse:
    found = await loom.data.signal(signal_id)
    if found is None:
        return loom.error(404, "No such signal", f"there is no signal {signal_id}")
    return loom.page(
        "signal.html",
        signal=found,
        retried=request.query_params.get("retried"),
        discarded=request.query_params.get("discarded"),
    )


@router.post("/signals/{signal_id}/retry")
async def retry_signal(signal_id: str, request: Request, loom: Pages) -> Response:
    form = await loom.form_of(request)
    if isinstance(form, HTMLResponse):
        return form
    if await loom.data.signal(signal_id) is None:
        return loom.error(404, "No such signal", f"there is no signal {signal_id}")
    bus = loom.services.bus
    revived = await bus.retry(signal_id)
    if not revived:
        return loom.error(409, "Nothing to retry", f"signal {signal_id} has no dead delivery")
    await delivery_status(bus, signal_id, DELIVERY_WAIT_SECONDS)  # the page shows what it is
    return see_other(f"/signals/{segment(signal_id)}", retried=",".join(revived))


@router.post("/signals/{signal_id}/discard")
async def discard_signal(signal_id: str, request: Request, loom: Pages) -> Response:
    """Give up on the signal's dead deliveries, through the command path, as the API and
    the CLI do."""
    signed = await loom.signed_form(request, "by", "Bad discard")
    if isinstance(signed, HTMLResponse):
        return signed
    try:
        outcome = await loom.services.commands.discard(signal_id, None, signed.who, signed.key)
    except Refused as exc:
        return loom.error(409, "Nothing to discard", str(exc))
    return see_other(f"/signals/{segment(signal_id)}", discarded=outcome.signal_id)
