"""Loom's pages: server-rendered HTML under ``/loom``, readable without JavaScript.

This module mounts them and serves the pages that only read: the marks, a mark, the days,
the health. The pages that act, and the finding pages, are their own modules, one per
group: a mark's correct, retract and forget (:mod:`daemon.loom.mark_acts`), the seeds and
their review (:mod:`daemon.loom.seed_pages`), the signals and their retry and discard
(:mod:`daemon.loom.signal_pages`), the search over every layer and the week
(:mod:`daemon.loom.finding`). Every act goes through the command path
(:mod:`daemon.services.commands`), as the API's do, so each is a signal in the log.
"""

from __future__ import annotations

import time

import anyio
import anyio.to_thread
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from daemon.core.days import InvalidDay, parse_day
from daemon.core.records import MARK_STATES
from daemon.core.strength import WITHER_THRESHOLD
from daemon.files.daily import SUFFIX
from daemon.loom import finding, mark_acts, seed_pages, signal_pages
from daemon.loom.data import Citation, MarkFilter
from daemon.loom.days import day_files, day_lists, evidence_lines, locate
from daemon.loom.history import history
from daemon.loom.pages import (
    PREFIX,
    BadField,
    LoomPages,
    Pages,
    choices,
    clock_time,
    text_field,
)
from daemon.loom.plot import strength_plot
from daemon.services.running import Services

SEARCH_LIMIT = 200


def mount_loom(app: FastAPI, services: Services) -> None:
    """Serve the Loom pages from ``app``, reading and commanding through ``services``."""
    app.state.loom = LoomPages.of(services)
    app.include_router(router)
    for group in (mark_acts, seed_pages, signal_pages, finding):
        app.include_router(group.router)


router = APIRouter(prefix=PREFIX, include_in_schema=False)


@router.get("", include_in_schema=False)
async def root() -> Response:
    return RedirectResponse(f"{PREFIX}/", status_code=307)


@router.get("/static/loom.css")
async def stylesheet(loom: Pages) -> Response:
    return Response(loom.css, media_type="text/css", headers={"cache-control": "max-age=3600"})


@router.get("/")
@router.get("/marks")
async def marks_page(request: Request, loom: Pages) -> HTMLResponse:
    query = request.query_params
    try:
        wanted = MarkFilter(
            text=text_field(query.get("q", ""), "q"),
            prefix=text_field(query.get("subject", ""), "subject"),
            states=choices(query.getlist("state"), MARK_STATES, "state"),
            observed_by=text_field(query.get("observed_by", ""), "observed_by"),
        )
    except BadField as exc:
        return loom.error(422, "Bad search", str(exc))
    found, total = await loom.data.search_marks(wanted, loom.services.clock(), SEARCH_LIMIT)
    return loom.page(
        "marks.html",
        wanted=wanted,
        found=found,
        total=total,
        limit=SEARCH_LIMIT,
        states=MARK_STATES,
        observers=await loom.data.observers(),
    )


@router.get("/marks/{mark_id}")
async def mark_page(mark_id: str, request: Request, loom: Pages) -> HTMLResponse:
    found = await loom.data.mark(mark_id)
    if found is None:
        return loom.error(404, "No such mark", f"there is no mark {mark_id}")
    daily = loom.services.memory.daily
    evidence = await anyio.to_thread.run_sync(evidence_lines, daily, found.mark.evidence)
    entries = await anyio.to_thread.run_sync(history, found, daily)
    now = loom.services.clock()
    return loom.page(
        "mark.html",
        found=found,
        mark=found.mark,
        plot=strength_plot(
            found.mark, found.reinforcements, now, lambda at: clock_time(at, loom.zone)
        ),
        evidence=evidence,
        history=entries,
        threshold=WITHER_THRESHOLD,
        outcome=await mark_acts.outcome_of(loom, request, found),
    )


@router.get("/days")
async def days_page(loom: Pages) -> HTMLResponse:
    live, archived = await anyio.to_thread.run_sync(day_lists, loom.services.memory.daily)
    every = sorted(set(live) | set(archived), reverse=True)
    return loom.page("days.html", days=every, live=set(live), archived=set(archived))


@router.get("/days/{day}")
async def day_page(day: str, loom: Pages) -> HTMLResponse:
    try:
        parsed = parse_day(day)
    except InvalidDay as exc:
        return loom.error(422, "Bad day", f"day: {exc}")
    files = await anyio.to_thread.run_sync(day_files, loom.services.memory.daily, parsed)
    if not files:
        return loom.error(404, "No such day", f"there is no daily file for {parsed.isoformat()}")
    citations = await loom.data.citations_of_day(f"{parsed.isoformat()}{SUFFIX}")
    by_line: dict[tuple[str, int], list[Citation]] = {}
    for citation in citations:
        located = locate(files, citation.line_range)
        if located is None:
            continue
        start, end = citation.line_range
        for number in range(start, end + 1):
            by_line.setdefault((located.anchor, number), []).append(citation)
    return loom.page("day.html", day=parsed, files=files, by_line=by_line)


@router.get("/health")
async def health_page(loom: Pages) -> HTMLResponse:
    services = loom.services
    files = await anyio.to_thread.run_sync(services.memory.substrate.files)
    return loom.page(
        "health.html",
        accepting=services.bus.accepting,
        uptime=time.monotonic() - services.started,
        workspace=services.memory.workspace,
        receptors=services.bus.receptors,
        counts=await loom.data.open_delivery_counts(),
        rhythms=sorted(services.next_fires().items()),
        files=files,
    )
