"""Loom's pages: server-rendered HTML under ``/loom``, readable without JavaScript.

Reads go through :mod:`daemon.loom.data` and the file layers; the two things a page can
change (a seed's review, a dead signal's retry) go through the bus as signals or retries,
exactly as the JSON API does them.
"""

from __future__ import annotations

import getpass
import time
from dataclasses import dataclass
from datetime import date, datetime
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode
from zoneinfo import ZoneInfo

import anyio
import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from daemon import __version__
from daemon.bus import SignalBus
from daemon.core import signal_types
from daemon.core.clock import iso
from daemon.core.days import InvalidDay, parse_day
from daemon.core.records import Seed
from daemon.core.strength import WITHER_THRESHOLD
from daemon.files.daily import SUFFIX, DailyLog
from daemon.loom.data import Citation, LoomData, MarkFilter, SignalFilter
from daemon.loom.guard import FIELD, FormGuard
from daemon.loom.plot import strength_plot
from daemon.schema.waits import DELIVERY_WAIT_SECONDS

if TYPE_CHECKING:
    from daemon.api.deps import Services

PREFIX = "/loom"
MARK_STATES = ("active", "withered", "promoted")
DELIVERY_STATUSES = ("pending", "delivered", "dead", "unrouted")
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


@dataclass(frozen=True)
class DayFile:
    archived: bool
    lines: list[str]
    anchor: str  # "L" for the live file, "A" for the archived one


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


def loom_router(services: Services) -> APIRouter:
    """The Loom pages, to be included in the daemon's app."""
    router = APIRouter(prefix=PREFIX, include_in_schema=False)
    bus, memory, clock = services.bus, services.layers, services.clock
    data = LoomData(memory.store, memory.workspace)
    guard = FormGuard()
    env = _environment(memory.zone)
    css = resources.files("daemon.loom").joinpath("static/loom.css").read_text("utf-8")
    reviewer = getpass.getuser()

    def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(name).render(csrf=guard.token, **context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def error(status: int, title: str, detail: str) -> HTMLResponse:
        return page("error.html", status, title=title, detail=detail)

    async def form_of(request: Request) -> dict[str, str] | HTMLResponse:
        """The POSTed form, or the page refusing it."""
        body = (await request.body()).decode("utf-8", errors="replace")
        form = dict(parse_qsl(body, keep_blank_values=True))
        refusal = guard.refusal(request, form)
        if refusal is not None:
            return error(403, "Refused", refusal)
        return form

    @router.get("", include_in_schema=False)
    async def root() -> Response:
        return RedirectResponse(f"{PREFIX}/", status_code=307)

    @router.get("/static/loom.css")
    async def stylesheet() -> Response:
        return Response(css, media_type="text/css", headers={"cache-control": "max-age=3600"})

    @router.get("/")
    @router.get("/marks")
    async def marks_page(request: Request) -> HTMLResponse:
        query = request.query_params
        try:
            wanted = MarkFilter(
                text=_text(query.get("q", ""), "q"),
                prefix=_text(query.get("subject", ""), "subject"),
                states=_choices(query.getlist("state"), MARK_STATES, "state"),
                observed_by=_text(query.get("observed_by", ""), "observed_by"),
            )
        except BadField as exc:
            return error(422, "Bad search", str(exc))
        found, total = await data.search_marks(wanted, clock(), SEARCH_LIMIT)
        return page(
            "marks.html",
            wanted=wanted,
            found=found,
            total=total,
            limit=SEARCH_LIMIT,
            states=MARK_STATES,
            observers=await data.observers(),
        )

    @router.get("/marks/{mark_id}")
    async def mark_page(mark_id: str) -> HTMLResponse:
        found = await data.mark(mark_id)
        if found is None:
            return error(404, "No such mark", f"there is no mark {mark_id}")
        evidence = await anyio.to_thread.run_sync(
            _evidence_lines, memory.daily, found.mark.evidence
        )
        boosts = []
        for boost in found.reinforcements:
            lines = await anyio.to_thread.run_sync(_evidence_lines, memory.daily, boost.evidence)
            boosts.append((boost, lines))
        return page(
            "mark.html",
            found=found,
            mark=found.mark,
            plot=strength_plot(found.mark, found.reinforcements, clock()),
            evidence=evidence,
            boosts=boosts,
            threshold=WITHER_THRESHOLD,
        )

    @router.get("/days")
    async def days_page() -> HTMLResponse:
        live, archived = await anyio.to_thread.run_sync(_days, memory.daily)
        every = sorted(set(live) | set(archived), reverse=True)
        return page("days.html", days=every, live=set(live), archived=set(archived))

    @router.get("/days/{day}")
    async def day_page(day: str) -> HTMLResponse:
        try:
            parsed = parse_day(day)
        except InvalidDay as exc:
            return error(422, "Bad day", f"day: {exc}")
        files = await anyio.to_thread.run_sync(_day_files, memory.daily, parsed)
        if not files:
            return error(404, "No such day", f"there is no daily file for {parsed.isoformat()}")
        citations = await data.citations_of_day(f"{parsed.isoformat()}{SUFFIX}")
        by_line: dict[tuple[str, int], list[Citation]] = {}
        for citation in citations:
            located = _locate(files, citation.line_range)
            if located is None:
                continue
            start, end = citation.line_range
            for number in range(start, end + 1):
                by_line.setdefault((located.anchor, number), []).append(citation)
        return page("day.html", day=parsed, files=files, by_line=by_line)

    @router.get("/seeds")
    async def seeds_page() -> HTMLResponse:
        found = await data.seeds()
        based = await data.marks(sorted({m for s in found for m in s.based_on_marks}))
        return page(
            "seeds.html",
            seeds=found,
            marks={m.id: m for m in based},
            reviewer=reviewer,
        )

    @router.get("/seeds/{seed_id}")
    async def seed_page(seed_id: str, request: Request) -> HTMLResponse:
        seed = await data.seed(seed_id)
        if seed is None:
            return error(404, "No such seed", f"there is no seed {seed_id}")
        review_id = request.query_params.get("signal")
        review = await data.signal(review_id) if review_id else None
        if review is not None and review["payload"].get("seed_id") != seed.id:
            review = None  # only this seed's own review is reported on its page
        based = await data.marks(seed.based_on_marks)
        return page(
            "seed.html", seed=seed, marks={m.id: m for m in based}, review=review, reviewer=reviewer
        )

    @router.post("/seeds/{seed_id}/review")
    async def review_seed(seed_id: str, request: Request) -> Response:
        form = await form_of(request)
        if isinstance(form, HTMLResponse):
            return form
        seed = await data.seed(seed_id)
        if seed is None:
            return error(404, "No such seed", f"there is no seed {seed_id}")
        try:
            decision = _choices([form.get("decision", "")], ("accepted", "rejected"), "decision")
            who = _text(form.get("reviewer", ""), "reviewer", required=True, longest=128)
        except BadField as exc:
            return error(422, "Bad review", str(exc))
        if seed.state != "pending":
            return error(409, "Already reviewed", f"seed {seed.id} is already {seed.state}")
        stored = await bus.emit_raw(_review_signal(seed, decision[0], who))
        await _settle(bus, stored.id)
        target = f"{PREFIX}/seeds/{quote(seed.id, safe='')}?{urlencode({'signal': stored.id})}"
        return RedirectResponse(target, status_code=303)

    @router.get("/signals")
    async def signals_page(request: Request) -> HTMLResponse:
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
            return error(422, "Bad filter", str(exc))
        return page(
            "signals.html",
            wanted=wanted,
            found=await data.signals(wanted, SIGNAL_LIMIT),
            facets=await data.signal_facets(),
            statuses=DELIVERY_STATUSES,
            limit=SIGNAL_LIMIT,
        )

    @router.get("/signals/{signal_id}")
    async def signal_page(signal_id: str, request: Request) -> HTMLResponse:
        found = await data.signal(signal_id)
        if found is None:
            return error(404, "No such signal", f"there is no signal {signal_id}")
        return page("signal.html", signal=found, retried=request.query_params.get("retried"))

    @router.post("/signals/{signal_id}/retry")
    async def retry_signal(signal_id: str, request: Request) -> Response:
        form = await form_of(request)
        if isinstance(form, HTMLResponse):
            return form
        if await data.signal(signal_id) is None:
            return error(404, "No such signal", f"there is no signal {signal_id}")
        revived = await bus.retry(signal_id)
        if not revived:
            return error(409, "Nothing to retry", f"signal {signal_id} has no dead delivery")
        await _settle(bus, signal_id)
        target = f"{PREFIX}/signals/{quote(signal_id, safe='')}?retried={','.join(revived)}"
        return RedirectResponse(target, status_code=303)

    @router.get("/health")
    async def health_page() -> HTMLResponse:
        files = await anyio.to_thread.run_sync(memory.substrate.files)
        return page(
            "health.html",
            accepting=bus.accepting,
            uptime=time.monotonic() - services.started,
            workspace=memory.workspace,
            receptors=bus.receptors,
            counts=await data.open_delivery_counts(),
            rhythms=sorted(services.next_fires().items()),
            files=files,
        )

    return router


def _duration(seconds: float) -> str:
    """``42 s``, ``5 min``, ``3 h 12 min``, ``2 d 4 h``: as precise as a glance needs."""
    minutes, hours, days = int(seconds // 60), int(seconds // 3600), int(seconds // 86400)
    if days:
        return f"{days} d {hours % 24} h"
    if hours:
        return f"{hours} h {minutes % 60} min"
    return f"{minutes} min" if minutes else f"{int(seconds)} s"


def _review_signal(seed: Seed, decision: str, reviewer: str) -> dict[str, Any]:
    return {
        "type": signal_types.SEED_REVIEWED,
        "source_id": "loom",
        "source_layer": "human",
        "workspace_id": seed.workspace_id,
        "payload": {"seed_id": seed.id, "decision": decision, "reviewer": reviewer},
    }


async def _settle(bus: SignalBus, signal_id: str) -> None:
    """Wait (bounded) for the signal's deliveries; the page then shows whatever they are."""
    with anyio.move_on_after(DELIVERY_WAIT_SECONDS):
        await bus.settled(signal_id)


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


def _days(daily: DailyLog) -> tuple[list[date], list[date]]:
    return daily.days(archived=False), daily.days(archived=True)


def _day_files(daily: DailyLog, day: date) -> list[DayFile]:
    """The day's live file first (evidence is looked up there first), then its archive."""
    files = []
    for archived, anchor in ((False, "L"), (True, "A")):
        lines = daily.read(day, archived=archived)
        if lines is not None:
            files.append(DayFile(archived, lines, anchor))
    return files


def _locate(files: list[DayFile], line_range: tuple[int, int]) -> DayFile | None:
    """The file cited lines are in, found as :meth:`DailyLog.evidence` finds them."""
    start, end = line_range
    return next((f for f in files if 1 <= start <= end <= len(f.lines)), None)


@dataclass(frozen=True)
class EvidenceLines:
    day: str
    line_range: tuple[int, int]
    lines: list[str] | None  # None: the file no longer holds those lines
    anchor: str


def _evidence_lines(daily: DailyLog, evidence: dict[str, Any]) -> EvidenceLines | None:
    daily_file, line_range = evidence.get("daily_file"), evidence.get("line_range")
    if not isinstance(daily_file, str) or not line_range:
        return None
    try:
        day = parse_day(daily_file.removesuffix(SUFFIX))
    except InvalidDay:
        return None
    span = (int(line_range[0]), int(line_range[1]))
    located = _locate(_day_files(daily, day), span)
    if located is None:
        return EvidenceLines(day.isoformat(), span, None, "L")
    lines = located.lines[span[0] - 1 : span[1]]
    return EvidenceLines(day.isoformat(), span, lines, located.anchor)
