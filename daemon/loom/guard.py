"""Loom's defence against cross-site requests: every form carries a token that only a page
served by this daemon knows, and a browser's POST must come from the page's own origin.

A page on another site can make the browser send a POST here, but cannot read our pages,
so it cannot know the token; and the browser names that other site in ``Origin`` (or
``Sec-Fetch-Site``), which is refused as well. Clients that are not browsers (curl on the
socket) send neither header and need only the token.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from starlette.requests import Request

FIELD = "csrf"


class FormGuard:
    def __init__(self, token: str | None = None) -> None:
        # One token per daemon process: a restart invalidates forms left open.
        self.token = token or secrets.token_urlsafe(32)

    def refusal(self, request: Request, form: dict[str, str]) -> str | None:
        """Why this form POST is refused, or None if it may proceed."""
        if request.headers.get("sec-fetch-site") == "cross-site":
            return "the form was sent from another site"
        origin = request.headers.get("origin") or request.headers.get("referer")
        host = request.headers.get("host", "")
        if origin is not None and urlsplit(origin).netloc != host:
            return "the form was sent from another origin"
        if not hmac.compare_digest(form.get(FIELD, "").encode(), self.token.encode()):
            return "the form's token is missing or stale; reload the page and try again"
        return None
