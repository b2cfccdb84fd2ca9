"""daemon.client: every method, sync and async, against the real daemon over its socket; the
typed errors; a write retried with its key after a lost answer (the in-process cases are in
tests/integration/test_client_in_process.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lossy_proxy import losing_answers, never_answering

from daemon.client import (
    AsyncClient,
    Client,
    Conflict,
    NotFound,
    NotReachable,
    OutcomeUnknown,
    Rejected,
)
from daemon.testing import DaemonHome, running

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
