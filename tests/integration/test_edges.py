"""The edge refuses what would only die: a payload its receptor would refuse, a seed the
gates refuse, a type no receptor binds (unless asked for). Through the API in process, and
through the client that every other door (the CLI, MCP) uses."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import FAST_RETRY, T0

from daemon.bus import SignalBus
from daemon.client import AsyncClient, Rejected
from daemon.composition import build_app, build_receptors
from daemon.config import parse_config
from daemon.services.recall import Memory
from daemon.services.running import Services
from daemon.store import Store

LATER = T0 + timedelta(hours=1)


@dataclass
class Doors:
    http: httpx.AsyncClient
    client: AsyncClient
    services: Services


@asynccontextmanager
async def doors(
    store: Store, root: Path, clock: Callable[[], datetime] = lambda: T0
) -> AsyncIterator[Doors]:
    """The daemon's app with all its receptors, reached over HTTP and by the client."""
    config = parse_config({"paths": {"daily": str(root / "daily"), "compost": str(root / "c")}})
    memory = Memory.from_config(config, store)
    receptors = build_receptors(config, store, memory.daily)
    async with SignalBus(store, receptors, retry=FAST_RETRY, clock=clock) as bus:
        services = Services(bus=bus, memory=memory, clock=clock)
        transport = httpx.ASGITransport(app=build_app(services, 1024 * 1024))
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://cambium") as http,
            AsyncClient(transport=transport, source_id="edge") as client,
        ):
            yield Doors(http, client, services)


def signal(signal_type: str, payload: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": signal_type, "source_id": "agent", "payload": payload} | more


async def stored_count(doors: Doors) -> int:
    return len(await doors.services.bus.store.read(lambda tx: tx.signals.listing(limit=100)))


def fields(response: httpx.Response) -> list[str]:
    assert response.status_code == 422, response.text
    return [e["field"] for e in response.json()["errors"]]


@pytest.mark.asyncio
async def test_a_payload_its_receptor_would_refuse_is_refused_and_not_stored(
    store: Store, tmp_path: Path
) -> None:
    async with doors(store, tmp_path) as edge:
        no_evidence = signal("memory.observation", {"subject": "user.x", "observation": "o"})
        assert fields(await edge.http.post("/v1/signals", json=no_evidence)) == ["payload.evidence"]
        bad_day = signal("memory.daily_note", {"text": "t", "date": "2026-13-01"})
        assert fields(await edge.http.post("/v1/signals", json=bad_day)) == ["payload.date"]
        with pytest.raises(Rejected) as refused:
            await edge.client.emit("memory.observation", {"subject": "user.x"})
        assert refused.value.status == 422
        assert {e.field for e in refused.value.errors} == {
            "payload.observation",
            "payload.evidence",
        }
        assert await stored_count(edge) == 0


@pytest.mark.asyncio
async def test_a_seed_the_gates_refuse_is_refused_naming_the_rule(
    store: Store, tmp_path: Path
) -> None:
    async with doors(store, tmp_path) as edge:
        done = {"subject": "user.x", "proposed_change": "done", "target_file": "USER.md"}
        answer = await edge.http.post("/v1/signals", json=signal("memory.seed_planted", done))
        assert fields(answer) == ["payload.proposed_change"]
        assert "status-shaped" in answer.json()["detail"]
        cites = done | {"proposed_change": "Likes figs.", "based_on_marks": ["mk_nope"]}
        with pytest.raises(Rejected) as refused:
            await edge.client.emit("memory.seed_planted", cites)
        assert [e.field for e in refused.value.errors] == ["payload.based_on_marks.0"]
        assert await stored_count(edge) == 0
        fine = done | {"proposed_change": "Likes figs."}
        assert (await edge.client.emit("memory.seed_planted", fine, wait=5)).deliveries == {
            "seeds": "delivered"
        }


@pytest.mark.asyncio
async def test_a_type_no_receptor_binds_needs_allow_unrouted(store: Store, tmp_path: Path) -> None:
    async with doors(store, tmp_path) as edge:
        typo = signal("memory.observaton", {"subject": "user.x"})
        answer = await edge.http.post("/v1/signals", json=typo)
        assert fields(answer) == ["type"] and "allow_unrouted" in answer.json()["detail"]
        with pytest.raises(Rejected):
            await edge.client.emit("memory.observaton", {})
        assert await stored_count(edge) == 0
        asked = await edge.http.post("/v1/signals", json=typo | {"allow_unrouted": True})
        assert asked.status_code == 201
        shown = (await edge.http.get(f"/v1/signals/{asked.json()['id']}")).json()
        assert shown["type"] == "memory.observaton" and shown["deliveries"] == []
        assert (await edge.client.emit("x.y", {}, allow_unrouted=True)).deliveries is None
        bad_flag = await edge.http.post("/v1/signals", json=typo | {"allow_unrouted": "yes"})
        assert fields(bad_flag) == ["allow_unrouted"]
        assert await stored_count(edge) == 2
        schema = (await edge.http.get("/openapi.json")).json()["paths"]["/v1/signals"]["post"]
        body = schema["requestBody"]["content"]["application/json"]["schema"]
        assert body["properties"]["allow_unrouted"]["type"] == "boolean"


# -- discarding dead deliveries ----------------------------------------------------------


async def dead_notes(edge: Doors, root: Path, *days: str) -> list[str]:
    """Daily notes whose delivery dies at once: a file stands where the daily directory
    should be (a fault even root cannot write through)."""
    daily = root / "daily"
    if daily.is_dir():
        daily.rmdir()
    daily.write_text("")
    ids = []
    for day in days:
        answer = await edge.client.note(f"walked on {day}", day=day, wait=5)
        assert answer.deliveries == {"daily": "dead"}
        ids.append(answer.id)
    return ids


async def dead_count(edge: Doors) -> int:
    return int((await edge.http.get("/v1/health")).json()["deliveries"]["dead"])


@pytest.mark.asyncio
async def test_dead_deliveries_are_discarded_one_or_all_and_say_by_whom(
    store: Store, tmp_path: Path
) -> None:
    now = [T0]
    async with doors(store, tmp_path, clock=lambda: now[0]) as edge:
        first, second, third = await dead_notes(edge, tmp_path, *DAYS)
        assert await dead_count(edge) == 3
        now[0] = LATER

        one = {"signal_id": first, "by": "ada"}
        answer = await edge.http.post("/v1/signals/discard", json=one)
        assert answer.status_code == 200 and answer.json()["applied"] is True
        assert await dead_count(edge) == 2
        [delivery] = (await edge.client.signal(first)).deliveries
        assert delivery.status == "discarded" and delivery.discarded is not None
        assert delivery.discarded.by == "ada" and delivery.discarded.at == LATER, "not its death"
        assert delivery.discarded.signal_id == answer.json()["signal_id"]
        assert delivery.last_error  # why it died is kept
        again = await edge.http.post("/v1/signals/discard", json=one)
        assert again.json()["signal_id"] == answer.json()["signal_id"], "keyed by what it names"
        assert (await edge.http.post(f"/v1/signals/{first}/retry")).status_code == 409
        healthy = await edge.client.observe("user.walks", "walks at dawn", wait=5)
        named = await edge.http.post(
            "/v1/signals/discard", json={"signal_id": healthy.id, "by": "a"}
        )
        assert named.status_code == 404, "its own deliveries, not the other signals' dead ones"

        everything = await edge.client.discard(receptor="daily", every=True)
        assert everything.applied and await dead_count(edge) == 0
        audit = (await edge.client.signal(everything.signal_id)).model_dump()
        assert audit["type"] == "memory.delivery_discarded" and audit["source_id"] == "edge"
        assert {
            d.status for s in (second, third) for d in (await edge.client.signal(s)).deliveries
        } == {"discarded"}
        nothing = await edge.http.post(
            "/v1/signals/discard", json={"signal_id": second, "by": "ada"}
        )
        assert nothing.status_code == 404 and "no dead delivery" in nothing.json()["detail"]
        vague = await edge.http.post("/v1/signals/discard", json={"receptor": "daily", "by": "a"})
        assert vague.status_code == 422


DAYS = ("2026-01-20", "2026-01-21", "2026-01-22")
