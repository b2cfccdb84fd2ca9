"""Loom's pages: server-rendered HTML under ``/loom``, readable without JavaScript.

Reads go through :mod:`daemon.loom.data` and the file layers; the two things a page can
change go as the JSON API does them: a seed's review through the command path
(:mod:`daemon.services.commands`), a dead signal's retry through the bus. The routes are
the module's; what they share (the read model, the form guard, the templates) is made once
per app by :func:`mount_loom` and handed to them as a dependency.
"""

from __future__ import annotations

import getpass
import time
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote, urlencode
from zoneinfo import ZoneInfo

import anyio
import anyio.to_thread
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from daemon import __version__
from daemon.core.clock import iso
from daemon.core.days import InvalidDay, parse_day
from daemon.core.records import CURRENT_MARK_STATES
from daemon.core.strength import WITHER_THRESHOLD
from daemon.files.daily import SUFFIX
from daemon.loom.data import Citation, LoomData, MarkFilter, SignalFilter
from daemon.loom.days import day_files, day_lists, evidence_lines, locate
from daemon.loom.guard import FIELD, FormGuard
from daemon.loom.plot import strength_plot
from daemon.schema.waits import DELIVERY_WAIT_SECONDS
from daemon.services.commands import Decision, delivery_status
from daemon.services.errors import Conflict, NotFound
from daemon.services.running import Services

PREFIX = "/loom"
DELIVERY_STATUSES = ("pending", "delivered", "dead", "discarded", "unrouted")
SEARCH_LIMIT = 200
SIGNAL_LIMIT = 200
MAX_FIELD = 512  # longest search text or reviewer name a form may send

SECURITY_HEADERS = {
    # Nothing from outside the machine, no inline script, no framing by other sites.
    "content-security-policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


class BadField(ValueError):
    """A query or form field that breaks its rule; the message names both."""


def _environment(zone: ZoneInfo) -> Environment:
    env = Environment(
        loader=PackageLoader("daemon.loom", "templates"),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )

    def when(value: datetime | str | None) -> str:
        if value is None:
            return ""
        if isinstance(value, str):  # an instant already in its JSON form (a signal's)
            value = datetime.fromisoformat(value)
        return value.astimezone(zone).strftime("%Y-%m-%d %H:%M")

    env.filters["when"] = when
    env.filters["duration"] = _duration
    env.filters["iso"] = iso
    env.filters["strength"] = lambda value: f"{value:.3f}"
    env.filters["segment"] = lambda value: quote(str(value), safe="")
    env.globals.update(prefix=PREFIX, zone=zone.key, version=__version__, field=FIELD)
    return env


@dataclass
class LoomPages:
    """What every page needs, made once for the app: the running daemon, Loom's read model,
    the form guard (its token is the app's), the templates and the stylesheet."""

    services: Services
    data: LoomData
    guard: FormGuard
    env: Environment
    css: str
    reviewer: str  # the name the review forms offer: the person running the daemon

    @classmethod
    def of(cls, services: Services) -> LoomPages:
        memory = services.memory
        css = resources.files("daemon.loom").joinpath("static/loom.css").read_text("utf-8")
        return cls(
            services=services,
            data=LoomData(memory.store, memory.workspace),
            guard=FormGuard(),
            env=_environment(memory.zone),
            css=css,
            reviewer=getpass.getuser(),
        )

    def page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(csrf=self.guard.token, **context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def error(self, status: int, title: str, detail: str) -> HTMLResponse:
        return self.page("error.html", status, title=title, detail=detail)

    async def form_of(self, request: Request) -> dict[str, str] | HTMLResponse:
        """The POSTed form, or the page refusing it."""
        body = (await request.body()).decode("utf-8", errors="replace")
        form = dict(parse_qsl(body, keep_blank_values=True))
        refusal = self.guard.refusal(request, form)
        if refusal is not None:
            return self.error(403, "Refused", refusal)
        return form


def mount_loom(app: FastAPI, services: Services) -> None:
    """Serve the Loom pages from ``app``, reading and commanding through ``services``."""
    app.state.loom = LoomPages.of(services)
    app.include_router(router)


def _pages(request: Request) -> LoomPages:
    pages: LoomPages = request.app.state.loom
    return pages


Pages = Annotated[LoomPages, Depends(_pages)]

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
            text=_text(query.get("q", ""), "q"),
            prefix=_text(query.get("subject", ""), "subject"),
            states=_choices(query.getlist("state"), CURRENT_MARK_STATES, "state"),
            observed_by=_text(query.get("observed_by", ""), "observed_by"),
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
        states=CURRENT_MARK_STATES,
        observers=await loom.data.observers(),
    )


@router.get("/marks/{mark_id}")
async def mark_page(mark_id: str, loom: Pages) -> HTMLResponse:
    found = await loom.data.mark(mark_id)
    if found is None:
        return loom.error(404, "No such mark", f"there is no mark {mark_id}")
    daily = loom.services.memory.daily
    evidence = await anyio.to_thread.run_sync(evidence_lines, daily, found.mark.evidence)
    boosts = []
    for boost in found.reinforcements:
        lines = await anyio.to_thread.run_sync(evidence_lines, daily, boost.evidence)
        boosts.append((boost, lines))
    return loom.page(
        "mark.html",
        found=found,
        mark=found.mark,
        plot=strength_plot(found.mark, found.reinforcements, loom.services.clock()),
        evidence=evidence,
        boosts=boosts,
        threshold=WITHER_THRESHOLD,
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


@router.get("/seeds")
async def seeds_page(loom: Pages) -> HTMLResponse:
    found = await loom.data.seeds()
    based = await loom.data.marks(sorted({m for s in found for m in s.based_on_marks}))
    return loom.page(
        "seeds.html", seeds=found, marks={m.id: m for m in based}, reviewer=loom.reviewer
    )


@router.get("/seeds/{seed_id}")
async def seed_page(seed_id: str, request: Request, loom: Pages) -> HTMLResponse:
    seed = await loom.data.seed(seed_id)
    if seed is None:
        return loom.error(404, "No such seed", f"there is no seed {seed_id}")
    review_id = request.query_params.get("signal")
    review = await loom.data.signal(review_id) if review_id else None
    if review is not None and review["payload"].get("seed_id") != seed.id:
        review = None  # only this seed's own review is reported on its page
    based = await loom.data.marks(seed.based_on_marks)
    return loom.page(
        "seed.html",
        seed=seed,
        marks={m.id: m for m in based},
        review=review,
        reviewer=loom.reviewer,
    )


@router.post("/seeds/{seed_id}/review")
async def review_seed(seed_id: str, request: Request, loom: Pages) -> Response:
    """Through the command path, as the API reviews (one review at a time, the same rules)."""
    form = await loom.form_of(request)
    if isinstance(form, HTMLResponse):
        return form
    try:
        decision = _decision(form.get("decision", ""))
        who = _text(form.get("reviewer", ""), "reviewer", required=True, longest=128)
    except BadField as exc:
        return loom.error(422, "Bad review", str(exc))
    try:
        outcome = await loom.services.commands.review(seed_id, decision, who, source="loom")
    except NotFound as exc:
        return loom.error(404, "No such seed", str(exc))
    except Conflict as exc:
        return loom.error(409, "Not reviewed", str(exc))
    query = urlencode({"signal": outcome.signal_id})
    return RedirectResponse(f"{PREFIX}/seeds/{quote(seed_id, safe='')}?{query}", status_code=303)


@router.get("/signals")
async def signals_page(request: Request, loom: Pages) -> HTMLResponse:
    query = request.query_params
    try:
        status = query.get("status", "")
        if status:
            _choices([status], DELIVERY_STATUSES, "status")
        wanted = SignalFilter(
            signal_type=_text(query.get("type", ""), "type"),
            status=status,
            source=_text(query.get("source", ""), "source"),
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
        reviewer=loom.reviewer,
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
    target = f"{PREFIX}/signals/{quote(signal_id, safe='')}?retried={','.join(revived)}"
    return RedirectResponse(target, status_code=303)


@router.post("/signals/{signal_id}/discard")
async def discard_signal(signal_id: str, request: Request, loom: Pages) -> Response:
    """Give up on the signal's dead deliveries, through the command path (a signal, so the
    log says who did and when), as the API and the CLI do."""
    form = await loom.form_of(request)
    if isinstance(form, HTMLResponse):
        return form
    try:
        who = _text(form.get("by", ""), "by", required=True, longest=128)
    except BadField as exc:
        return loom.error(422, "Bad discard", str(exc))
    try:
        outcome = await loom.services.commands.discard(signal_id, None, who)
    except NotFound as exc:
        return loom.error(409, "Nothing to discard", str(exc))
    query = urlencode({"discarded": outcome.signal_id})
    return RedirectResponse(
        f"{PREFIX}/signals/{quote(signal_id, safe='')}?{query}", status_code=303
    )


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


def _duration(seconds: float) -> str:
    """``42 s``, ``5 min``, ``3 h 12 min``, ``2 d 4 h``: as precise as a glance needs."""
    minutes, hours, days = int(seconds // 60), int(seconds // 3600), int(seconds // 86400)
    if days:
        return f"{days} d {hours % 24} h"
    if hours:
        return f"{hours} h {minutes % 60} min"
    return f"{minutes} min" if minutes else f"{int(seconds)} s"


def _text(value: str, field: str, *, required: bool = False, longest: int = MAX_FIELD) -> str:
    value = value.strip()
    if required and not value:
        raise BadField(f"{field}: must not be empty")
    if len(value) > longest:
        raise BadField(f"{field}: at most {longest} characters")
    return value


def _choices(values: list[str], allowed: tuple[str, ...], field: str) -> tuple[str, ...]:
    for value in values:
        if value not in allowed:
            raise BadField(f"{field}: must be one of {', '.join(allowed)} (got {value[:40]!r})")
    return tuple(values)


def _decision(value: str) -> Decision:
    decisions: tuple[Decision, ...] = ("accepted", "rejected")
    for decision in decisions:
        if value == decision:
            return decision
    raise BadField(f"decision: must be one of {', '.join(decisions)} (got {value[:40]!r})")
