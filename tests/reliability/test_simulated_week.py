"""A week of the daemon's life in a few seconds: an in-process bus with every real receptor
(wired as the daemon wires them), real daily and substrate directories, and an injected
clock that walks from morning to the 03:00 consolidation slot and on to the next morning.

Each day brings observations, daily notes (plain lines and ``OBS subject=...`` lines for
the mock extractor), and the night's ``memory.consolidate`` exactly as the bundled rhythm
fires it (its payload and idempotency key for the slot, fired twice as a restart would).
Seeds are planted, one accepted and one rejected; one day a note arrives late for a day
already consolidated, and that day is consolidated again by hand. The week ends on the
spring daylight-saving change (2026-03-29, Europe/Berlin).

Afterwards: the substrate is byte for byte what it was; every daily line ever written is
in its day's live or archived file, in order, once; every mark's evidence
(``daily_file`` and ``line_range``) points at an existing line that says what the mark says.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import pytest

from daemon.bus import RetryPolicy, SignalBus
from daemon.composition import build_receptors
from daemon.config import parse_config
from daemon.core.records import Mark, derived_id
from daemon.files.daily import DailyLog
from daemon.store import Store
from daemon.store.marks import MARK_STATES
from rhythms.template import bundled_templates, next_slot

BERLIN = ZoneInfo("Europe/Berlin")
FIRST_DAY = date(2026, 3, 23)  # a Monday; the week ends on the night of the DST change
DAYS = 7
OBS_LINE = re.compile(r"^OBS\s+subject=(\S+)\s+(\S.*?)\s*$")
RETRY = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05)


class Clock:
    """The bus's clock, moved by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class Week:
    """Emits what a week brings, one signal at a time, each settled before the next, and
    remembers every daily line it had written."""

    def __init__(self, bus: SignalBus, clock: Clock, store: Store) -> None:
        self.bus = bus
        self.clock = clock
        self.store = store
        self.written: defaultdict[date, list[str]] = defaultdict(list)
        self.observed = 0
        self.rhythm = bundled_templates("Europe/Berlin")[0]

    async def settle(self, signal_id: str) -> None:
        with anyio.fail_after(10):
            status = await self.bus.settled(signal_id)
        assert set(status.values()) == {"delivered"}, status

    async def emit(self, signal_type: str, payload: dict[str, Any]) -> str:
        stored = await self.bus.emit_raw(
            {"type": signal_type, "source_id": "week", "payload": payload}
        )
        await self.settle(stored.id)
        return stored.id

    async def note(self, day: date, text: str) -> None:
        await self.emit("memory.daily_note", {"text": text, "date": day.isoformat()})
        self.written[day].append(text)

    async def observe(self, subject: str, observation: str) -> Mark:
        signal_id = await self.emit(
            "memory.observation",
            {"subject": subject, "observation": observation, "evidence": {"note": "chat"}},
        )
        self.observed += 1
        mark = self.store.read_sync(lambda tx: tx.marks.get(Mark.id_for_signal(signal_id)))
        assert mark is not None
        return mark

    async def day(self, number: int, day: date) -> list[Mark]:
        self.clock.now = datetime.combine(day, time(9), BERLIN)
        marks = [await self.observe(f"week.day{number}.item{k}", f"item {k}") for k in (1, 2)]
        for k in (1, 2):
            await self.note(day, f"Day {number}: plain entry {k}.")
            await self.note(day, f"OBS subject=week.habit.day{number}.h{k} did habit {k}")
        return marks

    async def night(self) -> None:
        """The consolidation slot after now, fired as the rhythm fires it, then again (as a
        restarted scheduler catching up would): the second is a duplicate."""
        slot = next_slot(self.rhythm, self.clock.now)
        self.clock.now = slot
        first = await self.bus.emit(self.rhythm.signal_for(slot, slot))
        await self.settle(first.id)
        again = await self.bus.emit(self.rhythm.signal_for(slot, slot + timedelta(minutes=5)))
        assert again.duplicate and again.id == first.id

    async def review(self, seed_signal: str, decision: str) -> None:
        seed_id = derived_id("sd", seed_signal)
        await self.emit(
            "memory.seed_reviewed", {"seed_id": seed_id, "decision": decision, "reviewer": "me"}
        )


def digests(root: Path) -> dict[Path, str]:
    return {
        path: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def substrate_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "long-term").mkdir(parents=True)
    (home / "long-term" / "lessons.md").write_text("# Lessons\n\nCook vegetables at 180C.\n")
    (home / "long-term" / "identity.md").write_text("# Identity\n\nI protect afternoons.\n")
    (home / "SOUL.md").write_text("# Soul\n\nBe kind.\n")
    return home


async def live_a_week(week: Week, day_one: date) -> None:
    seeds: dict[str, str] = {}
    for number in range(DAYS):
        day = day_one + timedelta(days=number)
        marks = await week.day(number, day)
        if number == 2:
            for name, target in (("accept", "long-term/lessons.md"), ("reject", "SOUL.md")):
                seeds[name] = await week.emit(
                    "memory.seed_planted",
                    {
                        "subject": marks[0].subject,
                        "proposed_change": f"remember {marks[0].observation}",
                        "target_file": target,
                        "based_on_marks": [m.id for m in marks],
                    },
                )
        if number == 4:
            late_day = day_one + timedelta(days=1)  # consolidated three nights ago
            await week.note(late_day, "OBS subject=week.late.note remembered on day 4")
            await week.note(late_day, "A plain line, also late.")
            await week.emit("memory.consolidate", {"date": late_day.isoformat()})  # by hand
            await week.review(seeds["accept"], "accepted")
        if number == 5:
            await week.review(seeds["reject"], "rejected")
        await week.night()


@pytest.mark.asyncio
async def test_a_simulated_week_keeps_every_line_and_every_promise(
    store: Store, tmp_path: Path
) -> None:
    home = substrate_home(tmp_path)
    config = parse_config(
        {
            "paths": {
                "substrate": [str(home / "long-term"), str(home / "SOUL.md")],
                "daily": str(tmp_path / "daily"),
                "compost": str(tmp_path / "compost"),
            }
        }
    )
    before = digests(home)
    daily = DailyLog(config.paths.daily)
    clock = Clock(datetime.combine(FIRST_DAY, time(9), BERLIN))
    receptors = build_receptors(config, store, daily)
    async with SignalBus(store, receptors, clock=clock, retry=RETRY) as bus:
        week = Week(bus, clock, store)
        await live_a_week(week, FIRST_DAY)

    assert digests(home) == before, "the substrate is untouched, seeds accepted or not"
    counts = store.read_sync(lambda tx: tx.signals.open_counts())
    assert (counts.pending, counts.dead) == (0, 0), "nothing pending, nothing dead"

    assert daily.days(archived=False) == [], "every day was consolidated and archived"
    for day, lines in week.written.items():
        kept = (daily.read(day, archived=True) or []) + (daily.read(day) or [])
        assert kept == lines, f"{day}: every line written, in order, once"

    marks = store.read_sync(lambda tx: tx.marks.find("default", "", MARK_STATES))
    from_log = [m for m in marks if "daily_file" in m.evidence]
    for mark in from_log:
        hit = daily.evidence(mark.evidence["daily_file"], tuple(mark.evidence["line_range"]))
        assert hit is not None, f"{mark.id}: evidence points at no line"
        cited = OBS_LINE.match(hit.excerpt)
        assert cited is not None and (cited[1], cited[2]) == (mark.subject, mark.observation)
    obs_lines = [line for lines in week.written.values() for line in lines if OBS_LINE.match(line)]
    assert len(obs_lines) == 2 * DAYS + 1
    assert len(from_log) == len(obs_lines), "one mark per OBS line, none twice"
    assert len(marks) - len(from_log) == week.observed, "one mark per observation signal"

    seeds = {s.target_file: s for s in store.read_sync(lambda tx: tx.seeds.listing("default"))}
    assert seeds["long-term/lessons.md"].state == "accepted"
    assert seeds["SOUL.md"].state == "rejected"
    promoted = {m.id for m in marks if m.state == "promoted"}
    assert promoted == set(seeds["long-term/lessons.md"].based_on_marks)
