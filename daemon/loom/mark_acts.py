"""A mark's page acts: correct it, retract it, forget it. Each is two steps, both plain
forms: the first POST shows what will happen and asks to confirm (nothing is sent), the
second, with ``confirmed=yes``, sends the command through the command path
(:mod:`daemon.services.commands`) as the API and the CLI do, so it is a signal in the log.

Every form carries an idempotency key: the same form sent again (a double click, a reload
that resends) is answered by the first send, never applied twice. The answer leads to the
mark's page (a correction's: the new mark's), which says what was done by which signal; a
forget's also lists where the person's own live daily files still mention it (places, not
text: the files are theirs to edit).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from functools import partial
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from daemon.core import signal_types
from daemon.core.days import InvalidDay, parse_day
from daemon.core.forgetting import mentions
from daemon.core.records import Mark
from daemon.loom.data import MarkWithHistory
from daemon.loom.pages import (
    MAX_TEXT,
    PREFIX,
    BadField,
    LoomPages,
    Pages,
    Signed,
    see_other,
    segment,
    text_field,
)
from daemon.services.errors import Refused
from daemon.services.governance import ForgetTarget, live_lines

router = APIRouter(prefix=PREFIX, include_in_schema=False)

ACTS = ("correct", "retract", "forget")
# The signal each act sends, and how its outcome reads on the mark's page.
DONE = {
    signal_types.MARK_CORRECTED: "Corrected",
    signal_types.MARK_RETRACTED: "Retracted",
    signal_types.FORGET: "Forgotten",
}
MAX_LEFT = 50  # live lines listed after a forget (the rest: `cambium memory forget` lists all)


@dataclass(frozen=True)
class Asked:
    """What a mark's form asks for, checked."""

    act: str
    text: str  # correct: the new text
    reason: str
    by: str
    key: str


@dataclass(frozen=True)
class LiveLine:
    day: date
    number: int


def _asked(act: str, signed: Signed, mark: Mark) -> Asked:
    form, text = signed.form, ""
    if act == "correct":
        text = text_field(form.get("text", ""), "text", required=True, longest=MAX_TEXT)
        if text == mark.observation:
            raise BadField("text: is what the mark already says")
    reason = text_field(form.get("reason", ""), "reason", required=True, longest=MAX_TEXT)
    return Asked(act, text, reason, signed.who, signed.key)


def _refusal(act: str, found: MarkWithHistory) -> str | None:
    """Why the act cannot be asked for now (checked before the confirmation; the command
    path checks again when it is sent)."""
    mark = found.mark
    if act != "forget" and not mark.current:
        return f"mark {mark.id} is already {mark.state}: only a mark that stands can be {act}ed"
    if act == "forget" and all(m.state == "forgotten" for m in found.chain):
        return f"mark {mark.id} is already forgotten"
    return None


@router.post("/marks/{mark_id}/{act}")
async def act_on_mark(mark_id: str, act: str, request: Request, loom: Pages) -> Response:
    if act not in ACTS:
        return loom.error(404, "No such act", f"a mark can be {', '.join(ACTS)}ed; not {act!r}")
    signed = await loom.signed_form(request, "by", f"Not {act}ed")
    if isinstance(signed, HTMLResponse):
        return signed
    found = await loom.data.mark(mark_id)
    if found is None:
        return loom.error(404, "No such mark", f"there is no mark {mark_id}")
    try:
        asked = _asked(act, signed, found.mark)
    except BadField as exc:
        return loom.error(422, f"Not {act}ed", str(exc))
    if signed.form.get("confirmed") == "yes":
        # Not checked here first: a repeat of a sent form finds its mark ended already,
        # and is answered by the first send.
        return await _send(loom, found.mark, asked)
    refusal = _refusal(act, found)
    if refusal is not None:
        return loom.error(409, f"Not {act}ed", refusal)
    erased = [m for m in found.chain if m.state != "forgotten"]
    return loom.page("confirm.html", mark=found.mark, asked=asked, erased=erased)


async def _send(loom: LoomPages, mark: Mark, asked: Asked) -> Response:
    commands = loom.services.commands
    try:
        if asked.act == "correct":
            outcome = await commands.correct(mark.id, asked.text, asked.reason, asked.by, asked.key)
            # Applied, the answer is the new mark; stored and not applied yet, the old one.
            shown = Mark.id_for_signal(outcome.signal_id) if outcome.applied else mark.id
            return see_other(f"/marks/{segment(shown)}", signal=outcome.signal_id)
        if asked.act == "retract":
            outcome = await commands.retract(mark.id, asked.reason, asked.by, asked.key)
            return see_other(f"/marks/{segment(mark.id)}", signal=outcome.signal_id)
        target = ForgetTarget(mark_id=mark.id)
        forgotten = await commands.forget(target, asked.reason, asked.by, asked.key)
    except Refused as exc:
        return loom.refused(f"Not {asked.act}ed", exc)
    wanted = partial(mentions, forgotten=forgotten.mentions)
    left = await anyio.to_thread.run_sync(live_lines, loom.services.memory.daily, wanted)
    return see_other(
        f"/marks/{segment(mark.id)}",
        signal=forgotten.signal_id,
        left=[f"{day.isoformat()}:{number}" for day, number in left[:MAX_LEFT]],
    )


async def outcome_of(
    loom: LoomPages, request: Request, found: MarkWithHistory
) -> dict[str, Any] | None:
    """What the page reports of an act on this mark (``?signal=``): that signal, if it is a
    correction, retraction or forget of a mark of this one's chain; else nothing."""
    signal_id = request.query_params.get("signal")
    signal = await loom.data.signal(signal_id) if signal_id else None
    if signal is None or signal["type"] not in DONE:
        return None
    if signal["payload"].get("mark_id") not in {m.id for m in found.chain}:
        return None
    left = [line for v in request.query_params.getlist("left") if (line := _live_line(v))]
    daily = loom.services.memory.daily
    return {
        "done": DONE[signal["type"]],
        "signal": signal,
        "left": [(line, daily.path(line.day)) for line in left[:MAX_LEFT]],
    }


def _live_line(value: str) -> LiveLine | None:
    day, _, number = value.partition(":")
    try:
        return LiveLine(parse_day(day), int(number)) if number.isdigit() else None
    except InvalidDay:
        return None
