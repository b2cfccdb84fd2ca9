"""What every Loom page shares: the templates, the response headers, the form guard, the
checks of query and form fields, and how a refused command reads as a page.

:class:`LoomPages` is made once per app by :func:`daemon.loom.routes.mount_loom` and handed
to the routes as a dependency (:data:`Pages`).
"""

from __future__ import annotations

import getpass
import secrets
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote, urlencode
from zoneinfo import ZoneInfo

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, select_autoescape

from daemon import __version__
from daemon.core.clock import iso
from daemon.loom.data import LoomData
from daemon.loom.guard import FIELD, FormGuard
from daemon.services.errors import Conflict, NotFound, Refused
from daemon.services.running import Services

PREFIX = "/loom"
MAX_FIELD = 512  # longest search text or reviewer name a form may send
MAX_TEXT = 16_384  # longest correction or reason (as the API takes them)
KEY_FIELD = "idempotency_key"
MAX_KEY = 256
MAX_NAME = 128  # a reviewer's or a person's name, as the API takes it

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
class Signed:
    """A form that asks for a command: its fields, who asks, and its idempotency key."""

    form: dict[str, str]
    who: str
    key: str


def clock_time(value: datetime | str | None, zone: ZoneInfo) -> str:
    """An instant as a person reads it: in ``zone``, to the minute, labelled with the
    zone's abbreviation (``2026-05-20 14:00 CEST``)."""
    if value is None:
        return ""
    if isinstance(value, str):  # an instant already in its JSON form (a signal's)
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


def new_key() -> str:
    """A form's idempotency key: sending the form again is answered by the first send."""
    return secrets.token_urlsafe(18)


def _environment(zone: ZoneInfo) -> Environment:
    env = Environment(
        loader=PackageLoader("daemon.loom", "templates"),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = lambda value: clock_time(value, zone)
    env.filters["duration"] = duration
    env.filters["iso"] = iso
    env.filters["strength"] = lambda value: f"{value:.3f}"
    env.filters["segment"] = lambda value: quote(str(value), safe="")
    env.globals.update(
        prefix=PREFIX,
        zone=zone.key,
        version=__version__,
        field=FIELD,
        key_field=KEY_FIELD,
        new_key=new_key,
    )
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
    reviewer: str  # the name the forms offer: the person running the daemon

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

    @property
    def zone(self) -> ZoneInfo:
        return self.services.memory.zone

    def page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        zone_now = self.services.clock().astimezone(self.zone).strftime("%Z")
        html = self.env.get_template(name).render(
            csrf=self.guard.token, reviewer=self.reviewer, zone_label=zone_now, **context
        )
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def error(self, status: int, title: str, detail: str) -> HTMLResponse:
        return self.page("error.html", status, title=title, detail=detail)

    def refused(self, title: str, exc: Refused) -> HTMLResponse:
        """A command the rules refused: 404 (not there), 409 (its state), 422 (its input)."""
        status = 404 if isinstance(exc, NotFound) else 409 if isinstance(exc, Conflict) else 422
        detail = f"{exc.field}: {exc}" if status == 422 and exc.field else str(exc)
        return self.error(status, title, detail)

    async def form_of(self, request: Request) -> dict[str, str] | HTMLResponse:
        """The POSTed form, or the page refusing it."""
        body = (await request.body()).decode("utf-8", errors="replace")
        form = dict(parse_qsl(body, keep_blank_values=True))
        refusal = self.guard.refusal(request, form)
        if refusal is not None:
            return self.error(403, "Refused", refusal)
        return form

    async def signed_form(
        self, request: Request, who_field: str, title: str
    ) -> Signed | HTMLResponse:
        """The POSTed form of a command, with who asks (the field ``who_field``) and its
        idempotency key checked; or the page refusing it (403 or 422, titled ``title``)."""
        form = await self.form_of(request)
        if isinstance(form, HTMLResponse):
            return form
        try:
            who = text_field(form.get(who_field, ""), who_field, required=True, longest=MAX_NAME)
            return Signed(form, who, key_of(form))
        except BadField as exc:
            return self.error(422, title, str(exc))


async def _pages(request: Request) -> LoomPages:
    # Async, though it awaits nothing: FastAPI runs a plain function dependency in a worker
    # thread, a hop for every page.
    pages: LoomPages = request.app.state.loom
    return pages


Pages = Annotated[LoomPages, Depends(_pages)]


def see_other(path: str, **query: str | list[str]) -> RedirectResponse:
    """The answer to a form that changed something: the page that shows the change."""
    encoded = urlencode(query, doseq=True)
    return RedirectResponse(f"{PREFIX}{path}" + (f"?{encoded}" if encoded else ""), 303)


def segment(value: str) -> str:
    return quote(value, safe="")


def duration(seconds: float) -> str:
    """``42 s``, ``5 min``, ``3 h 12 min``, ``2 d 4 h``: as precise as a glance needs."""
    minutes, hours, days = int(seconds // 60), int(seconds // 3600), int(seconds // 86400)
    if days:
        return f"{days} d {hours % 24} h"
    if hours:
        return f"{hours} h {minutes % 60} min"
    return f"{minutes} min" if minutes else f"{int(seconds)} s"


def text_field(value: str, field: str, *, required: bool = False, longest: int = MAX_FIELD) -> str:
    value = value.replace("\r\n", "\n").strip()  # a form sends its line breaks as CRLF
    if required and not value:
        raise BadField(f"{field}: must not be empty")
    if len(value) > longest:
        raise BadField(f"{field}: at most {longest} characters")
    return value


def choices(values: list[str], allowed: tuple[str, ...], field: str) -> tuple[str, ...]:
    for value in values:
        if value not in allowed:
            raise BadField(f"{field}: must be one of {', '.join(allowed)} (got {value[:40]!r})")
    return tuple(values)


def key_of(form: dict[str, str]) -> str:
    """The form's idempotency key (every form that changes something carries one)."""
    return text_field(form.get(KEY_FIELD, ""), KEY_FIELD, required=True, longest=MAX_KEY)
