"""daemon.client in process, through httpx's ASGITransport on the real app, bus and store
(SQLite and PostgreSQL): a recall query checked before it is sent, recall by text and
workspace, and the bounded context (tests/acceptance/test_client.py runs every method
against the real daemon over its socket)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from support import T0

from daemon.api.app import create_app
from daemon.bus import SignalBus
from daemon.client import (
    AsyncClient,
    Rejected,
)
from daemon.config import parse_config
from daemon.services.recall import Memory
from daemon.services.running import Services
from daemon.store import Store
from receptors.governance import GovernanceReceptor
from receptors.observation import ObservationReceptor
from receptors.seeds import SeedReceptor


@asynccontextmanager
async def in_process(store: Store, tmp_path: Path) -> AsyncIterator[AsyncClient]:
    """The API app with a real bus and store, reached without a socket."""
    config = parse_config({"paths": {"daily": str(tmp_path / "daily")}}, source=None)
    memory = Memory.from_config(config, store)
    clock = lambda: T0 + timedelta(hours=1)  # noqa: E731
    receptors = [ObservationReceptor(), SeedReceptor(), GovernanceReceptor(store)]
    async with SignalBus(store, receptors, workspace="default", clock=clock) as bus:
        app = create_app(Services(bus=bus, memory=memory, clock=clock))
        async with AsyncClient(transport=httpx.ASGITransport(app), source_id="asgi") as client:
            yield client


@pytest.mark.asyncio
async def test_the_async_client_retracts_a_mark_and_undoes_a_review(
    store: Store, tmp_path: Path
) -> None:
    async with in_process(store, tmp_path) as client:
        await client.observe("user.pet", "has a cat called Miso", wait=10)
        [mark] = (await client.recall("user.pet", layers=["marks"])).marks
        retracted = await client.retract(mark.id, reason="never had a cat")
        assert retracted["signal_id"] and retracted["mark"]["state"] == "retracted"
        assert (await client.recall("user.pet", layers=["marks"])).marks == []
        await client.plant_seed("user.pet", "Add: cat Miso", "USER.md", wait=10)
        [seed] = await client.seeds()
        assert (await client.review_seed(seed.id, "accepted", "ada")).state == "accepted"
        undone = await client.undo_review(seed.id, "ada")
        assert undone["signal_id"] and [s.state for s in await client.seeds()] == ["pending"]


@pytest.mark.asyncio
async def test_a_recall_query_is_checked_before_it_is_sent(store: Store, tmp_path: Path) -> None:
    async with in_process(store, tmp_path) as client:
        await client.observe("user.tea", "drinks green tea", wait=10, intensity=0.05)
        withered = await client.recall("user.tea", include_withered=True, provenance=["observed"])
        assert [m.observation for m in withered.marks] == ["drinks green tea"]
        assert (await client.recall("user.tea")).marks == [], "below the default strength"
        with pytest.raises(Rejected) as refused:
            await client.recall("x", provenance=["guessed"])  # type: ignore[list-item]
    assert [e.field for e in refused.value.errors] == ["provenance.0"]


@pytest.mark.asyncio
async def test_recall_lentil_finds_the_mark_by_its_text(store: Store, tmp_path: Path) -> None:
    async with in_process(store, tmp_path) as client:
        await recall_by_text(client)


async def recall_by_text(in_process: AsyncClient) -> None:
    await in_process.observe("user.food.lunch", "likes lentil soup", wait=10)
    await in_process.observe("user.sleep.bedtime", "in bed by 23:00", wait=10)
    await in_process.observe("user.food.lunch", "likes lentils", workspace="work", wait=10)
    await in_process.observe("work.canteen", "the user food menu has lentil", wait=10)
    found = (await in_process.recall("lentil soup", layers=["marks"])).marks
    assert {(m.subject, m.observation) for m in found} == {
        ("user.food.lunch", "likes lentil soup"),
        ("work.canteen", "the user food menu has lentil"),
    }
    subtree = (await in_process.recall("user.food", layers=["marks"])).marks
    assert [m.observation for m in subtree] == ["likes lentil soup"], "a path is a subtree"
    everything = (await in_process.recall("", layers=["marks"])).marks
    assert len(everything) == 3
    other = (await in_process.recall("lentil", layers=["marks"], workspace="work")).marks
    assert [m.observation for m in other] == ["likes lentils"]
    assert (await in_process.recall("lent", layers=["marks"])).marks == [], "whole words only"


@pytest.mark.asyncio
async def test_the_context_route_is_bounded_and_refuses_a_tiny_budget(
    store: Store, tmp_path: Path
) -> None:
    async with in_process(store, tmp_path) as client:
        await bounded_context(client)


async def bounded_context(in_process: AsyncClient) -> None:
    for n in range(20):
        await in_process.observe(f"user.book.b{n}", f"read novel number {n}", wait=10)
    block = await in_process.context("novel", max_chars=1000, limit=50)
    assert len(block.text) <= 1000 and block.included + block.left_out == 20
    assert block.left_out > 0 and f"({block.left_out} more items did not fit)" in block.text
    with pytest.raises(Rejected) as refused:
        await in_process.context("novel", max_chars=50)
    assert [e.field for e in refused.value.errors] == ["max_chars"]
