"""Finding things: one search box over every layer, and what the memory learned in a week.

The search is recall itself (:func:`daemon.services.recall.recall`, as ``cambium memory
recall`` and ``/v1/recall`` run it, with the same defaults): the marks, the daily lines,
the substrate files and the compost that match, and the context block an agent would be
given for the same words (:mod:`daemon.services.context`). The week is the seven days (in
the configured time zone) up to and including today, or ``ago`` weeks before them.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from daemon.loom.days import anchor_of
from daemon.loom.pages import PREFIX, BadField, Pages, text_field
from daemon.schema.recall import DEFAULT_CHARS, RecallQuery
from daemon.services import context
from daemon.services.recall import recall

router = APIRouter(prefix=PREFIX, include_in_schema=False)

MAX_QUERY = 1024  # as recall's ``about``
WEEK_LIMIT = 100  # of each kind; the page says how many more there are
MAX_WEEKS_AGO = 520


@router.get("/search")
async def search_page(request: Request, loom: Pages) -> HTMLResponse:
    try:
        words = text_field(request.query_params.get("q", ""), "q", longest=MAX_QUERY)
    except BadField as exc:
        return loom.error(422, "Bad search", str(exc))
    if not words:
        return loom.page("search.html", q="", result=None)
    try:
        query = RecallQuery(about=words)
    except ValidationError as exc:
        return loom.error(422, "Bad search", f"q: {exc.errors()[0]['msg']}")
    memory = loom.services.memory
    result = await anyio.to_thread.run_sync(recall, query, memory, loom.services.clock())
    return loom.page(
        "search.html",
        q=words,
        result=result,
        limit=query.limit,
        anchors=[anchor_of(hit) for hit in result.daily],
        block=context.render(result.to_json(), words, DEFAULT_CHARS),
    )


@router.get("/week")
async def week_page(request: Request, loom: Pages) -> HTMLResponse:
    raw = request.query_params.get("ago", "0")
    if not raw.isdigit() or int(raw) > MAX_WEEKS_AGO:
        return loom.error(422, "Bad week", f"ago: must be a whole number from 0 to {MAX_WEEKS_AGO}")
    ago = int(raw)
    today = loom.services.clock().astimezone(loom.zone).date()
    first = today - timedelta(days=6 + 7 * ago)
    start = datetime.combine(first, time(0), tzinfo=loom.zone)
    end = datetime.combine(first + timedelta(days=7), time(0), tzinfo=loom.zone)
    found = await loom.data.week(start, end, WEEK_LIMIT)
    return loom.page("week.html", week=found, ago=ago, first=first, last=first + timedelta(6))
