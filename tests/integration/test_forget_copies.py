"""Forget means gone: every copy the daemon holds of a forgotten mark's text is erased or
redacted in the same governance step (SPEC §16) — the consolidation's checkpoint, a dead
delivery's last error, the subject's seeds and their plantings, the daemon-managed archive
lines the marks cite (recall stops serving them), later exports — and on PostgreSQL as on
SQLite no text column of any table holds it. A forget that matches nothing is refused."""

from __future__ import annotations

import json
import tarfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import inspect, text
from support import FAST_RETRY, T0, emit_and_settle, make_signal

from daemon.bus import SignalBus
from daemon.core.clock import Clock
from daemon.core.forgetting import forgotten_marker, mentions
from daemon.core.records import MARK_STATES, derived_id
from daemon.files.daily import DailyLog
from daemon.services.archive import export_archive
from daemon.services.commands import Commands
from daemon.services.errors import Invalid, NotFound
from daemon.services.governance import (
    ForgetTarget,
    Forgetting,
    archived_lines,
    erase_copies,
    live_lines,
    to_forget,
)
from daemon.services.mark_search import MarkSearch
from daemon.store import Store
from receptors.consolidation import ConsolidationReceptor
from receptors.daily_note import DailyNoteReceptor
from receptors.extractors import Extraction, MockExtractor
from receptors.governance import GovernanceReceptor
from receptors.observation import ObservationReceptor
from receptors.seeds import SeedReceptor

SECRET = "Okafor"  # a word only the forgotten text holds
TEXT = f"dentist appointment with Dr {SECRET} on Friday at 3pm"
LINE = f"OBS subject=user.health.dentist {TEXT}"
KEPT = "had lunch with Bea by the river"
DAY = date(2026, 4, 10)
FAILED_DAY = date(2026, 4, 9)


class ScriptedModel:
    """The LLM's stand-in: the mock extractor's facts, except for ``FAILED_DAY``, where it
    fails quoting its answer (as the LLM extractor's error quotes the model's problem)."""

    name = "scripted"

    async def extract(
        self, day: date, lines: Sequence[str], known_subjects: Sequence[str] = ()
    ) -> list[Extraction]:
        if day == FAILED_DAY:
            raise RuntimeError(f"the model answered {{'facts': [{TEXT!r}]}}, which is unusable")
        return await MockExtractor().extract(day, lines, known_subjects)


@dataclass
class Memory:
    store: Store
    bus: SignalBus
    daily: DailyLog
    mark_search: MarkSearch
    mark_id: str


def _clock() -> Clock:
    return lambda: T0 + timedelta(hours=1)


@asynccontextmanager
async def remembered(store: Store, root: Path) -> AsyncIterator[Memory]:
    """A day noted and consolidated into a mark (its checkpoint saved), a failed day's dead
    delivery quoting the text, a seed based on the mark; the bus still running."""
    daily, mark_search = DailyLog(root / "daily"), MarkSearch()
    receptors = [
        ObservationReceptor(),
        SeedReceptor(),
        GovernanceReceptor(store, daily, mark_search),
        ConsolidationReceptor(store, daily, ScriptedModel(), zone=ZoneInfo("UTC")),
        DailyNoteReceptor(daily, zone=ZoneInfo("UTC")),
    ]
    async with SignalBus(store, receptors, retry=FAST_RETRY) as bus:
        for day, line in ((DAY, KEPT), (DAY, LINE), (FAILED_DAY, "a line")):
            note = make_signal("memory.daily_note", {"text": line, "date": day.isoformat()})
            await emit_and_settle(bus, note)
        for day, status in ((DAY, "delivered"), (FAILED_DAY, "dead")):
            asked = make_signal("memory.consolidate", {"date": day.isoformat()})
            assert await emit_and_settle(bus, asked) == {"consolidation": status}
        [mark] = store.read_sync(lambda tx: tx.marks.find("default", "user.health", MARK_STATES))
        plant = {
            "subject": "user.health.dentist",
            "proposed_change": "add: goes to the dentist every spring",
            "target_file": "long-term/health.md",
            "based_on_marks": [mark.id],
        }
        await emit_and_settle(bus, make_signal("memory.seed_planted", plant))
        assert daily.read(DAY, archived=True) == [KEPT, LINE]
        yield Memory(store, bus, daily, mark_search, mark.id)


async def forget_health(memory: Memory) -> Any:
    commands = Commands(memory.bus, "default", _clock())
    return await commands.forget(ForgetTarget(subject="user.health"), "private", "joshua")


def failure_rows(store: Store) -> list[dict[str, Any]]:
    query = text("SELECT checkpoint, last_error FROM delivery_failures")
    rows = store.read_sync(lambda tx: tx.connection.execute(query).all())
    return [
        {"checkpoint": json.loads(c) if isinstance(c, str) else c, "last_error": e} for c, e in rows
    ]


@pytest.mark.asyncio
async def test_forget_redacts_the_consolidation_checkpoint(store: Store, tmp_path: Path) -> None:
    async with remembered(store, tmp_path) as memory:
        assert SECRET in json.dumps([r["checkpoint"] for r in failure_rows(store)])
        await forget_health(memory)
    checkpoints = [r["checkpoint"] for r in failure_rows(store) if r["checkpoint"]]
    assert SECRET not in json.dumps(checkpoints)
    # The checkpoint keeps its shape: a retry would find no forgotten extraction to write.
    [saved] = [c for c in checkpoints if "extracted 2026-04-10 after line 0" in c]
    assert saved["extracted 2026-04-10 after line 0"] == {"lines": 2, "items": []}


@pytest.mark.asyncio
async def test_forget_redacts_a_dead_deliverys_last_error(store: Store, tmp_path: Path) -> None:
    async with remembered(store, tmp_path) as memory:
        assert any(SECRET in (r["last_error"] or "") for r in failure_rows(store))
        await forget_health(memory)
    errors = [r["last_error"] for r in failure_rows(store) if r["last_error"]]
    assert errors and all(SECRET not in e for e in errors)
    assert any("[forgotten: tb_" in e for e in errors)


@pytest.mark.asyncio
async def test_forget_erases_the_subjects_seeds_and_their_plantings(
    store: Store, tmp_path: Path
) -> None:
    async with remembered(store, tmp_path) as memory:
        assert store.read_sync(lambda tx: tx.seeds.listing("default"))
        await forget_health(memory)
    assert store.read_sync(lambda tx: tx.seeds.listing("default")) == []
    planted = store.read_sync(
        lambda tx: tx.signals.payloads("default", ["memory.seed_planted"], [])
    )
    assert [payload for _, payload in planted] == [{"forgotten": planted_tombstone(store)}]


def planted_tombstone(store: Store) -> str:
    [tombstone] = store.read_sync(lambda tx: tx.tombstones.listing("default"))
    return tombstone.id


@pytest.mark.asyncio
async def test_forget_redacts_the_archived_lines_the_marks_cite(
    store: Store, tmp_path: Path
) -> None:
    async with remembered(store, tmp_path) as memory:
        assert memory.daily.search("Okafor", since=None, limit=5)
        await forget_health(memory)
        tombstone = planted_tombstone(store)
        # Line numbers stay: the kept line is still line 1, the forgotten one is a marker.
        assert memory.daily.read(DAY, archived=True) == [KEPT, f"[forgotten: {tombstone}]"]
        assert memory.daily.search("Okafor", since=None, limit=5) == []
        assert memory.daily.search("dentist", since=None, limit=5) == []
        assert [h.excerpt for h in memory.daily.search("lunch", since=None, limit=5)] == [KEPT]
        # The daily note that carried the line is erased too; the other one stays.
        notes = store.read_sync(
            lambda tx: tx.signals.payloads("default", ["memory.daily_note"], [])
        )
        assert {"text": KEPT, "date": "2026-04-10"} in [p for _, p in notes]
        assert SECRET not in json.dumps(notes)
    archive = (tmp_path / "daily" / "archive" / "2026-04-10.md").read_bytes()
    assert SECRET.encode() not in archive and archive.count(b"\n") == 2


@pytest.mark.asyncio
async def test_an_export_after_a_forget_holds_no_copy(store: Store, tmp_path: Path) -> None:
    async with remembered(store, tmp_path) as memory:
        before = tmp_path / "before.tar"
        export_archive(store, tmp_path / "daily", before, T0)
        assert SECRET.encode() in before.read_bytes()
        await forget_health(memory)
    after = tmp_path / "after.tar"
    export_archive(store, tmp_path / "daily", after, T0)
    with tarfile.open(after) as archive:
        names = archive.getnames()
    assert "daily/2026-04-10.md" in names or any(n.endswith("2026-04-10.md") for n in names)
    assert SECRET.encode() not in after.read_bytes()
    assert KEPT.encode() in after.read_bytes()


@pytest.mark.asyncio
async def test_no_text_column_of_any_table_holds_the_forgotten_text(
    store: Store, tmp_path: Path
) -> None:
    async with remembered(store, tmp_path) as memory:
        assert holding(store, SECRET)
        forgotten = await forget_health(memory)
    assert forgotten.applied
    assert holding(store, SECRET) == []
    assert holding(store, "lunch with Bea")  # the query finds what is there


def holding(store: Store, word: str) -> list[str]:
    """Every table.column whose value, as text, holds ``word``."""

    def scan(tx: Any) -> list[str]:
        connection = tx.connection
        found = []
        for table in inspect(connection).get_table_names():
            for column in inspect(connection).get_columns(table):
                name = column["name"]
                count = connection.execute(
                    text(f'SELECT count(*) FROM "{table}" WHERE CAST("{name}" AS TEXT) LIKE :w'),
                    {"w": f"%{word}%"},
                ).scalar()
                if count:
                    found.append(f"{table}.{column['name']}")
        return found

    return store.read_sync(scan)


@pytest.mark.asyncio
async def test_forgetting_nothing_is_refused_naming_the_pattern(
    store: Store, tmp_path: Path
) -> None:
    async with remembered(store, tmp_path) as memory:
        signals_before = store.read_sync(lambda tx: tx.signals.head())
        commands = Commands(memory.bus, "default", _clock())
        with pytest.raises(NotFound, match=r"no mark matches user\.nothing") as refused:
            await commands.forget(ForgetTarget(subject="user.nothing"), "why", "joshua")
        assert refused.value.field == "subject"
        assert store.read_sync(lambda tx: tx.signals.head()) == signals_before
        assert store.read_sync(lambda tx: tx.tombstones.listing("default")) == []
        # Forgetting the same subject twice: the second finds nothing left.
        await forget_health(memory)
        with pytest.raises(NotFound):
            await forget_health(memory)
    assert len(store.read_sync(lambda tx: tx.tombstones.listing("default"))) == 1


@pytest.mark.asyncio
async def test_a_reason_that_repeats_the_text_is_refused(store: Store, tmp_path: Path) -> None:
    async with remembered(store, tmp_path) as memory:
        commands = Commands(memory.bus, "default", _clock())
        with pytest.raises(Invalid, match="must not repeat what is forgotten"):
            await commands.forget(ForgetTarget(subject="user.health"), TEXT, "joshua")
    assert store.read_sync(lambda tx: tx.tombstones.listing("default")) == []


@pytest.mark.asyncio
async def test_forget_lists_the_live_lines_that_still_mention_it(
    store: Store, tmp_path: Path
) -> None:
    async with remembered(store, tmp_path) as memory:
        today = date(2026, 4, 11)
        for line in ("breakfast", "call the dentist to move Friday", KEPT):
            note = make_signal("memory.daily_note", {"text": line, "date": today.isoformat()})
            await emit_and_settle(bus=memory.bus, signal=note)
        before = memory.daily.read(today)
        forgotten = await forget_health(memory)
        live = live_lines(memory.daily, lambda line: mentions(line, forgotten.mentions))
        assert live == [(today, 2)]
        assert memory.daily.read(today) == before  # the person's file is theirs


@pytest.mark.asyncio
async def test_a_forget_interrupted_after_the_archive_was_redacted_completes(
    store: Store, tmp_path: Path
) -> None:
    """A crash after steps 1 and 2 (copies erased, archive redacted) and before the marks'
    commit: the redelivered forget finds the marks again, the archive already redacted
    (the line stays one marker), and counts what the first attempt erased."""
    async with remembered(store, tmp_path) as memory:
        asked = make_signal("memory.forget", {"subject": "user.health", "reason": "private"})
        target = ForgetTarget(subject="user.health")
        planned = store.read_sync(lambda tx: to_forget(tx, "default", target))
        lines = tuple(archived_lines(memory.daily, planned.cited()))
        first = Forgetting(target, planned.marks, planned.evidence, lines)
        await store.write(lambda tx: erase_copies(tx, asked, first))
        marker = forgotten_marker(derived_id("tb", asked.id))
        assert memory.daily.redact_archive(planned.cited(), marker) == 1
        assert await emit_and_settle(memory.bus, asked) == {"governance": "delivered"}
    assert memory.daily.read(DAY, archived=True) == [KEPT, marker]
    [tombstone] = store.read_sync(lambda tx: tx.tombstones.listing("default"))
    assert (tombstone.marks_erased, tombstone.signals_erased) == (1, 2)  # note, planting
    assert holding(store, SECRET) == []
