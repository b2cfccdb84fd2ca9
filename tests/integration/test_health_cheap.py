"""``/v1/health`` is asked often (status, Loom, supervisors): it serves the substrate's
cached listing and touches no file per call; the watcher's invalidation asks for a new one.
It reads the open deliveries' counts again only after a commit of this daemon's store, or
after a second (another daemon's changes)."""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from support import FAST_RETRY, T0, emit_and_settle, make_signal

from daemon.api.health import OpenCounts, open_counts
from daemon.bus import SignalBus
from daemon.composition import build_app, build_receptors
from daemon.config import parse_config
from daemon.core import signal_types
from daemon.files.substrate import Substrate
from daemon.services.recall import Memory
from daemon.services.running import Services
from daemon.store import Store


@asynccontextmanager
async def serving(
    store: Store, root: Path, notes: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, Memory, SignalBus]]:
    paths = {"daily": str(root / "daily"), "compost": str(root / "c"), "substrate": [str(notes)]}
    config = parse_config({"workspace": "home", "paths": paths})
    layers = Memory.from_config(config, store)
    receptors = build_receptors(config, store, layers.daily)
    async with SignalBus(store, receptors, workspace="home", retry=FAST_RETRY) as bus:
        app: Any = build_app(Services(bus=bus, memory=layers, clock=lambda: T0), 1 << 20)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://cambium") as api:
            yield api, layers, bus


def notes_with(root: Path, *names: str) -> Path:
    notes = root / "notes"
    notes.mkdir(exist_ok=True)
    for name in names:
        (notes / name).write_text(f"# {name}\n")
    return notes


async def watched(api: httpx.AsyncClient) -> list[str]:
    files: list[str] = (await api.get("/v1/health")).json()["substrate"]["watched_files"]
    return files


@pytest.mark.asyncio
async def test_health_lists_no_directory_and_stats_no_file_per_call(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = notes_with(tmp_path, "a.md", "b.md")
    touched: list[str] = []
    real_files, real_scandir, real_stat = Substrate.files, os.scandir, os.stat

    def files(self: Substrate) -> list[Path]:
        touched.append("Substrate.files")
        return real_files(self)

    def scandir(*args: Any, **kwargs: Any) -> Any:
        touched.append(f"scandir {args}")
        return real_scandir(*args, **kwargs)

    def stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).startswith(str(notes)):
            touched.append(f"stat {path}")
        return real_stat(path, *args, **kwargs)

    async with serving(store, tmp_path, notes) as (api, _, _):
        first = await watched(api)
        monkeypatch.setattr(Substrate, "files", files)
        monkeypatch.setattr(os, "scandir", scandir)
        monkeypatch.setattr(os, "stat", stat)
        later = [await watched(api) for _ in range(3)]
    assert touched == []
    assert first == [str(notes / "a.md"), str(notes / "b.md")]
    assert later == [first] * 3


@pytest.mark.asyncio
async def test_health_lists_again_once_the_watcher_says_the_substrate_changed(
    store: Store, tmp_path: Path
) -> None:
    notes = notes_with(tmp_path, "a.md")
    async with serving(store, tmp_path, notes) as (api, layers, _):
        before = await watched(api)
        notes_with(tmp_path, "b.md")
        layers.substrate.invalidate()  # what the watcher does on the change
        after = await watched(api)
    assert before == [str(notes / "a.md")]
    assert after == [str(notes / "a.md"), str(notes / "b.md")]


@pytest.mark.asyncio
async def test_health_reads_the_open_deliveries_again_only_after_a_commit(
    store: Store, tmp_path: Path
) -> None:
    notes = notes_with(tmp_path, "a.md")
    async with serving(store, tmp_path, notes) as (api, _, bus):
        counts = open_counts(store)
        before = counts.reads
        answers = [(await api.get("/v1/health")).json()["deliveries"] for _ in range(4)]
        assert counts.reads == before + 1  # four answers, one read of the store
        assert answers == [{"pending": 0, "dead": 0}] * 4
        note = make_signal(signal_types.DAILY_NOTE, {"text": "tea", "date": "2026-04-11"})
        assert await emit_and_settle(bus, note) == {"daily": "delivered"}
        await api.get("/v1/health")
        assert counts.reads == before + 2  # the emit committed: read again


@pytest.mark.asyncio
async def test_counts_another_process_changed_are_read_again_within_a_second(
    store: Store,
) -> None:
    now = [100.0]
    counts = OpenCounts(store, seconds=1.0, clock=lambda: now[0])
    first = await counts.get()
    now[0] += 0.9
    assert await counts.get() is first and counts.reads == 1
    now[0] += 0.1  # another daemon on the same database may have changed them by now
    await counts.get()
    assert counts.reads == 2


@pytest.mark.asyncio
async def test_health_says_the_index_is_preparing_until_the_start_has_brought_it_up_to_date(
    store: Store, tmp_path: Path
) -> None:
    async with serving(store, tmp_path, notes_with(tmp_path, "a.md")) as (api, memory, _):
        assert (await api.get("/v1/health")).json()["index"] == "preparing"
        memory.prepare_search()
        assert (await api.get("/v1/health")).json()["index"] == "ready"


@pytest.mark.asyncio
async def test_health_says_how_far_the_preparation_is_and_nothing_once_it_is_done(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an import of three years of notes the start's preparation takes a minute:
    "preparing" alone said neither where it was nor how much was left."""
    async with serving(store, tmp_path, notes_with(tmp_path, "a.md")) as (api, memory, _):
        reached, go_on = threading.Event(), threading.Event()

        def refresh(progress: Any = None, most: Any = None) -> bool:
            progress(412, 1098)  # as the daily layer reports each file it looked at
            reached.set()
            go_on.wait(10)
            return True

        monkeypatch.setattr(memory.daily, "refresh", refresh)
        preparing = threading.Thread(target=memory.prepare_search)
        preparing.start()
        try:
            assert await anyio.to_thread.run_sync(reached.wait, 10)
            health = (await api.get("/v1/health")).json()
            assert health["index"] == "preparing"
            assert health["preparation"] == {"layer": "daily", "done": 412, "total": 1098}
        finally:
            go_on.set()
            await anyio.to_thread.run_sync(preparing.join)
        health = (await api.get("/v1/health")).json()
        assert health["index"] == "ready" and health.get("preparation") is None
