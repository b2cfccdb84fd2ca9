"""daemon.client: every method, sync and async, against the real daemon over its socket; the
typed errors; a write retried with its key after a lost answer; and, in process through
httpx's ASGITransport on SQLite and PostgreSQL, recall by text, workspace and context."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from lossy_proxy import losing_answers, never_answering
from support import T0

from daemon.api.app import create_app
from daemon.bus import SignalBus
from daemon.client import (
    AsyncClient,
    Client,
    Conflict,
    NotFound,
    NotReachable,
    OutcomeUnknown,
    Rejected,
)
from daemon.config import parse_config
from daemon.services.recall import Layers
from daemon.services.running import Services
from daemon.store import Store
from daemon.testing import DaemonHome, running
from receptors.governance import GovernanceReceptor
from receptors.observation import ObservationReceptor
from receptors.seeds import SeedReceptor

# -- against the real daemon ---------------------------------------------------------------


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHome]:
    home = DaemonHome(tmp_path_factory.mktemp("client"))
    with running(home):
        yield home


@pytest.fixture
def client(daemon: DaemonHome) -> Iterator[Client]:
    with Client(daemon.socket, source_id="test-agent") as client:
        yield client


def test_health_is_typed(client: Client) -> None:
    health = client.health()
    assert health.status == "ok" and health.workspace == "default"
    assert {r.key for r in health.receptors} >= {"observation", "seeds", "daily"}
    assert health.deliveries == {"pending": 0, "dead": 0} or health.deliveries["dead"] == 0


def test_observe_recall_signal_and_context(client: Client) -> None:
    stored = client.observe("user.food.lunch", "likes lentil soup", wait=10)
    assert stored.deliveries == {"observation": "delivered"} and not stored.duplicate
    assert stored.idempotency_key, "a key is generated and given back"
    [mark] = client.recall("lentil", layers=["marks"]).marks
    assert (mark.subject, mark.observation, mark.observed_by) == (
        "user.food.lunch",
        "likes lentil soup",
        "test-agent",
    )
    assert mark.first_observed_at.tzinfo is not None
    assert mark.id in {m.id for m in client.recall("", layers=["marks"]).marks}, "empty: all"
    assert client.recall("lentil", layers=["marks"], workspace="elsewhere").marks == []
    signal = client.signal(stored.id)
    assert signal.type == "memory.observation" and signal.source_id == "test-agent"
    assert [(d.receptor, d.status) for d in signal.deliveries] == [("observation", "delivered")]
    block = client.context("lentil", max_chars=300)
    assert len(block.text) <= 300 and "likes lentil soup" in block.text
    assert block.included >= 1 and block.max_chars == 300


def test_the_same_key_is_stored_once(client: Client) -> None:
    first = client.emit(
        "memory.daily_note", {"text": "a run by the river"}, idempotency_key="k-1", wait=10
    )
    again = client.emit(
        "memory.daily_note", {"text": "a run by the river"}, idempotency_key="k-1", wait=10
    )
    assert (again.id, again.duplicate, first.duplicate) == (first.id, True, False)


def test_note_seed_review_consolidate_and_retry(client: Client) -> None:
    noted = client.note("slept eight hours", wait=10)
    assert noted.deliveries == {"daily": "delivered"}
    assert any("eight hours" in d.excerpt for d in client.recall("slept", layers=["daily"]).daily)
    planted = client.plant_seed(
        "user.food", "Add: likes lentil soup", "USER.md", source_id="gardener", wait=10
    )
    assert planted.deliveries == {"seeds": "delivered"}
    [seed] = [s for s in client.seeds("pending") if s.planted_by == "gardener"]
    reviewed = client.review_seed(seed.id, "accepted", "ada", idempotency_key="review-1")
    assert (reviewed.state, reviewed.reviewed_by) == ("accepted", "ada")
    repeated = client.review_seed(seed.id, "accepted", "ada", idempotency_key="review-1")
    assert (repeated.state, repeated.signal_id) == ("accepted", reviewed.signal_id)
    with pytest.raises(Conflict, match="already accepted"):
        client.review_seed(seed.id, "rejected", "bob")
    consolidated = client.consolidate("2026-01-15", wait=10)
    assert consolidated.deliveries == {"consolidation": "delivered"}
    with pytest.raises(Conflict, match="no dead delivery"):
        client.retry(consolidated.id)


def test_typed_errors(client: Client, tmp_path: Path) -> None:
    with pytest.raises(Rejected) as local:
        client.observe("user.food", "x", intensity=3.0)  # refused before sending
    assert [e.field for e in local.value.errors] == ["intensity"]
    with pytest.raises(Rejected) as remote:
        client.recall("lentil", limit=0)
    assert remote.value.status == 422 and [e.field for e in remote.value.errors] == ["limit"]
    with pytest.raises(NotFound):
        client.signal("no-such-signal")
    with Client(tmp_path / "nobody.sock") as down, pytest.raises(NotReachable):
        down.observe("user.food", "likes soup")


def test_a_write_whose_answer_is_lost_is_outcome_unknown_and_its_retry_is_safe(
    daemon: DaemonHome, client: Client, tmp_path: Path
) -> None:
    proxy = tmp_path / "lossy.sock"
    with losing_answers(daemon.socket, proxy) as lost, Client(proxy) as lossy:
        with pytest.raises(OutcomeUnknown) as unknown:
            lossy.observe("user.drink", "drinks green tea", source_id="lossy", wait=10)
        with pytest.raises(NotReachable):
            lossy.health()  # a read without an answer has no outcome to worry about
    assert b'"duplicate":false' in lost[0], "the daemon did store it"
    key = unknown.value.idempotency_key
    retried = client.observe(
        "user.drink", "drinks green tea", source_id="lossy", idempotency_key=key, wait=10
    )
    assert retried.duplicate and retried.id.encode() in lost[0]
    marks = client.recall("user.drink", layers=["marks"]).marks
    assert [(m.observation, m.reinforcement_count) for m in marks] == [("drinks green tea", 0)]


def test_a_daemon_that_never_answers_times_out_as_outcome_unknown(tmp_path: Path) -> None:
    hung = tmp_path / "hung.sock"
    with never_answering(hung), Client(hung, answer_seconds=0.5) as client:
        with pytest.raises(OutcomeUnknown) as unknown:
            client.note("a line", idempotency_key="note-7")
        with pytest.raises(NotReachable, match="did not answer"):
            client.recall("x")
    assert unknown.value.idempotency_key == "note-7"


@pytest.mark.asyncio
async def test_the_async_client_does_the_same(daemon: DaemonHome, tmp_path: Path) -> None:
    async with AsyncClient(daemon.socket, source_id="async-agent") as client:
        assert (await client.health()).status == "ok"
        stored = await client.observe("user.pet", "has a cat called Miso", wait=10)
        assert stored.deliveries == {"observation": "delivered"}
        again = await client.observe(
            "user.pet", "has a cat called Miso", idempotency_key=stored.idempotency_key, wait=10
        )
        assert again.duplicate and again.id == stored.id
        [mark] = (await client.recall("miso", layers=["marks"])).marks
        assert mark.observed_by == "async-agent"
        assert (await client.signal(stored.id)).id == stored.id
        block = await client.context("miso", max_chars=250)
        assert len(block.text) <= 250
        noted = await client.note("fed Miso", wait=10)
        assert noted.deliveries == {"daily": "delivered"}
        planted = await client.plant_seed("user.pet", "Add: cat Miso", "USER.md", wait=10)
        seed = next(s for s in await client.seeds() if s.proposed_change == "Add: cat Miso")
        assert planted.deliveries == {"seeds": "delivered"}
        assert (await client.review_seed(seed.id, "rejected", "ada")).state == "rejected"
        assert (await client.consolidate("2026-01-16", wait=10)).deliveries
        with pytest.raises(Rejected):
            await client.recall("x", horizon="yesterday")
        with pytest.raises(NotFound):
            await client.retry("no-such-signal")
    proxy = tmp_path / "lossy.sock"
    with losing_answers(daemon.socket, proxy):
        async with AsyncClient(proxy) as lossy:
            with pytest.raises(OutcomeUnknown):
                await lossy.note("lost and found", idempotency_key="async-note", wait=10)
    async with AsyncClient(daemon.socket) as client:
        retried = await client.note("lost and found", idempotency_key="async-note", wait=10)
    assert retried.duplicate
    async with AsyncClient(tmp_path / "nobody.sock") as down:
        with pytest.raises(NotReachable):
            await down.health()


# -- in process: the app through httpx's ASGITransport ------------------------------------


@asynccontextmanager
async def in_process(store: Store, tmp_path: Path) -> AsyncIterator[AsyncClient]:
    """The API app with a real bus and store, reached without a socket."""
    config = parse_config({"paths": {"daily": str(tmp_path / "daily")}}, source=None)
    memory = Layers.from_config(config, store)
    clock = lambda: T0 + timedelta(hours=1)  # noqa: E731
    receptors = [ObservationReceptor(), SeedReceptor(), GovernanceReceptor(store)]
    async with SignalBus(store, receptors, workspace="default", clock=clock) as bus:
        app = create_app(Services(bus=bus, layers=memory, clock=clock))
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
