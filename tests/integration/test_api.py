"""The HTTP API in process: the real app, bus and store, reached through httpx's
ASGITransport (no socket, no subprocess), with the guards the daemon puts in front of it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from in_process import BODY_LIMIT, OBSERVATION, PLANT, TOKEN, serving

from daemon.api.guards import BodyLimit
from daemon.core.records import derived_id
from daemon.core.signal import MAX_PAYLOAD_BYTES
from daemon.store import Store


def fields(response: httpx.Response) -> list[str]:
    return [e["field"] for e in response.json()["errors"]]


@pytest.mark.asyncio
async def test_an_emit_is_answered_once_durable_and_delivered(store: Store, tmp_path: Path) -> None:
    async with serving(store, tmp_path) as api:
        answer = await api.post("/v1/signals", json=OBSERVATION, params={"wait": 5})
        assert answer.status_code == 201
        assert answer.json()["deliveries"] == {"observation": "delivered"}
        shown = (await api.get(f"/v1/signals/{answer.json()['id']}")).json()
        assert shown["workspace_id"] == "home"  # the bus's workspace, not the model's default
        assert shown["deliveries"][0]["status"] == "delivered"
        recalled = (await api.get("/v1/recall", params={"about": "user.food"})).json()
        assert [m["observation"] for m in recalled["marks"]] == ["likes figs"]


@pytest.mark.asyncio
async def test_bad_input_is_422_naming_the_field(store: Store, tmp_path: Path) -> None:
    async with serving(store, tmp_path) as api:
        bad = await api.post("/v1/signals", json={**OBSERVATION, "intensity": 2})
        assert bad.status_code == 422 and fields(bad) == ["intensity"]
        assert (await api.post("/v1/signals", content=b"{not json")).status_code == 422
        limit = await api.get("/v1/recall", params={"about": "x", "limit": 0})
        assert limit.status_code == 422 and fields(limit) == ["limit"]
        for wait in ("-1", "31", "soon", "nan"):
            late = await api.post("/v1/signals", json=OBSERVATION, params={"wait": wait})
            assert late.status_code == 422 and fields(late) == ["wait"], wait
        assert store.read_sync(lambda tx: tx.signals.listing()) == [], "nothing stored"
        assert (await api.get("/v1/signals")).status_code in (404, 405)


@pytest.mark.asyncio
async def test_unknown_things_are_404_and_conflicts_409(store: Store, tmp_path: Path) -> None:
    async with serving(store, tmp_path) as api:
        assert (await api.get("/v1/signals/nope")).status_code == 404
        assert (await api.post("/v1/signals/nope/retry")).status_code == 404
        review = {"decision": "accepted", "reviewer": "ada"}
        assert (await api.post("/v1/seeds/nope/review", json=review)).status_code == 404
        stored = (await api.post("/v1/signals", json=OBSERVATION, params={"wait": 5})).json()
        retry = await api.post(f"/v1/signals/{stored['id']}/retry")
        assert retry.status_code == 409 and "no dead delivery" in retry.json()["detail"]


@pytest.mark.asyncio
async def test_a_seed_is_reviewed_once_and_only_in_its_workspace(
    store: Store, tmp_path: Path
) -> None:
    async with serving(store, tmp_path) as api:
        elsewhere = await api.post(
            "/v1/signals", json=PLANT | {"workspace_id": "other"}, params={"wait": 5}
        )
        assert elsewhere.json()["deliveries"] == {"seeds": "delivered"}
        await api.post("/v1/signals", json=PLANT | {"idempotency_key": "p1"}, params={"wait": 5})
        [ours] = (await api.get("/v1/seeds")).json()
        review = {"decision": "accepted", "reviewer": "ada"}
        # The other workspace's seed is not there for this daemon's reviewers.
        assert [s["id"] for s in (await api.get("/v1/seeds")).json()] == [ours["id"]]
        theirs = derived_id("sd", elsewhere.json()["id"])
        crossing = await api.post(f"/v1/seeds/{theirs}/review", json=review)
        assert crossing.status_code == 404 and crossing.json()["detail"] == f"no seed {theirs}"
        untouched = store.read_sync(lambda tx: tx.seeds.get(theirs, "other"))
        assert untouched is not None and untouched.state == "pending"
        accepted = await api.post(f"/v1/seeds/{ours['id']}/review", json=review)
        assert accepted.status_code == 200 and accepted.json()["state"] == "accepted"
        again = await api.post(f"/v1/seeds/{ours['id']}/review", json=review)
        assert again.status_code == 409 and "already accepted" in again.json()["detail"]


@pytest.mark.asyncio
async def test_too_large_is_413_declared_streamed_or_as_a_payload(
    store: Store, tmp_path: Path
) -> None:
    async with serving(store, tmp_path) as api:
        declared = await api.post("/v1/signals", content=b"x" * (BODY_LIMIT + 1))
        assert declared.status_code == 413

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked
            for _ in range(BODY_LIMIT // 65536 + 2):
                yield b" " * 65536

        streamed = await api.post("/v1/signals", content=chunks())
        assert streamed.status_code == 413
        big = {**OBSERVATION, "payload": {**OBSERVATION["payload"], "pad": "x" * 60_000}}
        big["payload"]["more"] = ["y" * 60_000] * 4  # over 256 KiB, under the body limit
        payload = await api.post("/v1/signals", json=big)
        assert payload.status_code == 413, payload.text
        assert fields(payload) == ["payload"] and str(MAX_PAYLOAD_BYTES) in payload.text
        assert (await api.get("/v1/health")).json()["deliveries"] == {"pending": 0, "dead": 0}


@pytest.mark.asyncio
async def test_tcp_needs_the_bearer_token_in_any_case(store: Store, tmp_path: Path) -> None:
    async with serving(store, tmp_path, TOKEN) as tcp_api:
        assert (await tcp_api.get("/v1/health")).status_code == 401
        wrong = await tcp_api.get("/v1/health", headers={"Authorization": "Bearer wrong"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        for scheme in ("Bearer", "bearer", "BEARER"):
            right = await tcp_api.get("/v1/health", headers={"Authorization": f"{scheme} {TOKEN}"})
            assert right.status_code == 200, scheme


@pytest.mark.asyncio
async def test_hostile_values_are_422_on_every_store(store: Store, tmp_path: Path) -> None:
    """The same bad-input corpus on SQLite and PostgreSQL, the same outcome: 422 naming the
    field, nothing stored, nothing stalled."""
    corpus: list[tuple[dict[str, Any] | bytes, str]] = [
        (
            {**OBSERVATION, "payload": {**OBSERVATION["payload"], "observation": "a\x00b"}},
            "payload",
        ),
        ({**OBSERVATION, "payload": {"sub\x00ject": "x"}}, "payload"),
        ({**OBSERVATION, "idempotency_key": "key\x00"}, "idempotency_key"),
        ({**OBSERVATION, "affinity": ["tag\x00"]}, "affinity.0"),
        ({**OBSERVATION, "emitted_at": "0001-01-01T00:00:00+01:00"}, "emitted_at"),
        ({**OBSERVATION, "emitted_at": "9999-12-31T23:59:59-05:00"}, "emitted_at"),
        ({**OBSERVATION, "emitted_at": "1899-12-31T00:00:00Z"}, "emitted_at"),
        (b'{"type": "a.b", "type": "c.d", "source_id": "x"}', "body"),
        (b'{"type": "a.b", "source_id": "x", "payload": {"k": 1, "k": 2}}', "body"),
        (b"[" * 100_000, "body"),
        (b'{"type": "a.b", "source_id": "x", "intensity": NaN}', "intensity"),
    ]
    async with serving(store, tmp_path) as api:
        for body, field in corpus:
            sent = {"content": body} if isinstance(body, bytes) else {"json": body}
            answer = await api.post("/v1/signals", **sent)  # type: ignore[arg-type]
            assert answer.status_code == 422, (body, answer.text)
            assert fields(answer)[0] == field, (body, answer.text)
        for horizon in ("100000000d", "0d", "0001-01-01T00:00:00+01:00"):
            answer = await api.get("/v1/recall", params={"about": "x", "horizon": horizon})
            assert answer.status_code == 422 and fields(answer) == ["horizon"], horizon
        assert (await api.get("/v1/signals/x", params={})).status_code == 404
        health = (await api.get("/v1/health")).json()
    assert health["deliveries"] == {"pending": 0, "dead": 0}
    assert store.read_sync(lambda tx: tx.signals.listing()) == []


@pytest.mark.asyncio
async def test_concurrent_reviews_of_one_seed_leave_no_dead_delivery(
    store: Store, tmp_path: Path
) -> None:
    async with serving(store, tmp_path) as api:
        await api.post("/v1/signals", json=PLANT, params={"wait": 5})
        [seed] = (await api.get("/v1/seeds")).json()
        reviews = [
            api.post(f"/v1/seeds/{seed['id']}/review", json={"decision": d, "reviewer": r})
            for d, r in (("accepted", "ada"), ("rejected", "bob"), ("accepted", "cy"))
        ]
        answers = await asyncio.gather(*reviews)
        health = (await api.get("/v1/health")).json()
    assert sorted(a.status_code for a in answers) == [200, 409, 409]
    assert health["deliveries"] == {"pending": 0, "dead": 0}


@pytest.mark.asyncio
async def test_a_body_that_never_finishes_is_408(store: Store, tmp_path: Path) -> None:
    never = asyncio.Event()

    async def trickle() -> AsyncIterator[bytes]:
        yield b'{"type": "a.b",'
        await never.wait()  # the rest never comes

    async with serving(store, tmp_path) as api:
        guard = BodyLimit(api._transport.app, BODY_LIMIT, timeout_seconds=0.2)  # type: ignore[attr-defined]
        transport = httpx.ASGITransport(app=guard)
        async with httpx.AsyncClient(transport=transport, base_url="http://cambium") as slow:
            answer = await slow.post("/v1/signals", content=trickle())
    assert answer.status_code == 408 and "not received within 0.2 s" in answer.json()["detail"]


@pytest.mark.asyncio
async def test_no_page_loads_anything_from_outside(store: Store, tmp_path: Path) -> None:
    async with serving(store, tmp_path) as api:
        assert (await api.get("/docs")).status_code == 404
        assert (await api.get("/redoc")).status_code == 404
        schema = (await api.get("/openapi.json")).json()
        assert schema["info"]["title"] == "Cambium Memory"
        emit = schema["paths"]["/v1/signals"]["post"]
        assert [p["name"] for p in emit["parameters"]] == ["wait"], "documented, though lean"
        assert (
            "payload" in emit["requestBody"]["content"]["application/json"]["schema"]["properties"]
        )


@pytest.mark.asyncio
async def test_correct_retract_and_forget_through_the_api(store: Store, tmp_path: Path) -> None:
    async with serving(store, tmp_path) as api:
        stored = (await api.post("/v1/signals", json=OBSERVATION, params={"wait": 5})).json()
        [mark] = (await api.get("/v1/recall", params={"about": "user.food"})).json()["marks"]
        fix = {"text": "likes fresh figs", "reason": "more precise", "by": "ada"}
        corrected = await api.post(f"/v1/marks/{mark['id']}/correct", json=fix)
        assert corrected.status_code == 200, corrected.text
        new = corrected.json()["mark"]
        assert corrected.json()["superseded"]["superseded_by"] == new["id"]
        assert new["supersedes"] == mark["id"] and new["observed_by"] == "ada"
        again = await api.post(f"/v1/marks/{mark['id']}/correct", json=fix)
        assert again.status_code == 409 and "already superseded" in again.json()["detail"]
        missing = await api.post("/v1/marks/mk_nope/retract", json={"reason": "r", "by": "ada"})
        assert missing.status_code == 404
        no_reason = await api.post(f"/v1/marks/{new['id']}/retract", json={"by": "ada"})
        assert no_reason.status_code == 422 and fields(no_reason) == ["reason"]
        shown = (await api.get("/v1/recall", params={"about": "user.food"})).json()["marks"]
        assert [m["observation"] for m in shown] == ["likes fresh figs"]
        history = await api.get(
            "/v1/recall", params={"about": "user.food", "include_history": "true"}
        )
        assert {m["id"]: m["state"] for m in history.json()["marks"]} == {
            mark["id"]: "superseded",
            new["id"]: "active",
        }

        both = {"subject": "user", "mark_id": new["id"], "reason": "r", "by": "ada"}
        assert (await api.post("/v1/forget", json=both)).status_code == 422
        forgot = await api.post(
            "/v1/forget", json={"subject": "user.food", "reason": "private", "by": "ada"}
        )
        assert forgot.status_code == 200, forgot.text
        tombstone = forgot.json()["tombstone"]
        assert (tombstone["marks_erased"], tombstone["signals_erased"]) == (2, 2)
        assert (await api.get("/v1/tombstones")).json() == [tombstone]
        assert (await api.get("/v1/recall", params={"about": "user.food"})).json()["marks"] == []
        erased = (await api.get(f"/v1/signals/{stored['id']}")).json()
        assert erased["payload"] == {"forgotten": tombstone["id"]}
        assert (await api.get("/v1/health")).json()["deliveries"] == {"pending": 0, "dead": 0}


@pytest.mark.asyncio
async def test_a_review_is_undone_through_the_api(store: Store, tmp_path: Path) -> None:
    plant = {
        "type": "memory.seed_planted",
        "source_id": "agent",
        "payload": {"subject": "user.food", "proposed_change": "x", "target_file": "a.md"},
    }
    async with serving(store, tmp_path) as api:
        assert (await api.post("/v1/seeds/nope/undo", json={"reviewer": "ada"})).status_code == 404
        await api.post("/v1/signals", json=plant, params={"wait": 5})
        [seed] = (await api.get("/v1/seeds")).json()
        early = await api.post(f"/v1/seeds/{seed['id']}/undo", json={"reviewer": "ada"})
        assert early.status_code == 409 and "no review to undo" in early.json()["detail"]
        review = {"decision": "rejected", "reviewer": "ada"}
        await api.post(f"/v1/seeds/{seed['id']}/review", json=review)
        undone = await api.post(f"/v1/seeds/{seed['id']}/undo", json={"reviewer": "ada"})
        assert undone.status_code == 200 and undone.json()["state"] == "pending"


@pytest.mark.asyncio
async def test_each_command_repeated_with_its_key_gets_the_first_answer(
    store: Store, tmp_path: Path
) -> None:
    async with serving(store, tmp_path) as api:
        await api.post("/v1/signals", json=OBSERVATION, params={"wait": 5})
        await api.post("/v1/signals", json=PLANT, params={"wait": 5})
        [mark] = (await api.get("/v1/recall", params={"about": "user.food"})).json()["marks"]
        [seed] = (await api.get("/v1/seeds")).json()
        commands = [
            (f"/v1/seeds/{seed['id']}/review", {"decision": "accepted", "reviewer": "ada"}),
            (f"/v1/seeds/{seed['id']}/undo", {"reviewer": "ada"}),
            (f"/v1/marks/{mark['id']}/correct", {"text": "figs", "reason": "r", "by": "ada"}),
        ]
        for path, body in commands:
            keyed = body | {"idempotency_key": f"k-{path}"}
            first, again = [await api.post(path, json=keyed) for _ in range(2)]
            assert first.status_code == again.status_code == 200, (path, again.text)
            assert first.json()["signal_id"] == again.json()["signal_id"]
            # Without the key the same request is refused: the first one changed the state.
            assert (await api.post(path, json=body)).status_code == 409


@pytest.mark.asyncio
async def test_a_command_stored_but_not_applied_yet_is_202_naming_its_signal(
    store: Store, tmp_path: Path
) -> None:
    async with serving(store, tmp_path, receptors={"observation"}) as api:
        await api.post("/v1/signals", json=OBSERVATION, params={"wait": 5})
        [mark] = (await api.get("/v1/recall", params={"about": "user.food"})).json()["marks"]
        retract = {"reason": "wrong", "by": "ada"}
        answer = await api.post(f"/v1/marks/{mark['id']}/retract", json=retract)
        assert answer.status_code == 202
        [signal_id] = answer.json()["detail"].removeprefix("stored as signal ").split(";")[:1]
        assert answer.json() == {"detail": f"stored as signal {signal_id}; not applied yet"}
        stored = (await api.get(f"/v1/signals/{signal_id}")).json()
        assert stored["type"] == "memory.mark_retracted" and stored["source_id"] == "ada"


@pytest.mark.asyncio
async def test_changes_since_the_edge_of_the_calendar_is_an_answer_or_a_422(
    store: Store, tmp_path: Path
) -> None:
    """Found by the fuzzer: ``since=0001-01-01T00:04:00+01:00`` has no instant in UTC, and
    year 1 itself left no room for the second the query subtracts: both were a 500."""
    async with serving(store, tmp_path) as api:
        await api.post("/v1/signals", json=OBSERVATION, params={"wait": 5})
        refused = await api.get("/v1/changes", params={"since": "0001-01-01T00:04:00+01:00"})
        assert refused.status_code == 422 and "since" in refused.text
        everything = await api.get("/v1/changes", params={"since": "0001-01-01T00:00:00Z"})
        assert everything.status_code == 200
        assert [m["observation"] for m in everything.json()["marks_made"]] == ["likes figs"]
        late = await api.get("/v1/changes", params={"since": "9999-12-31T23:59:59Z"})
        assert late.status_code == 200 and late.json()["marks_made"] == []


@pytest.mark.asyncio
async def test_a_recall_horizon_at_the_edge_of_the_calendar_is_an_answer_or_a_422(
    store: Store, tmp_path: Path
) -> None:
    """``horizon=0001-01-01`` in the daemon's zone (Berlin) has no UTC instant: it was a 503
    saying the store was unavailable; ``9999-12-31T23:59:59Z`` crashed the recall. A day
    before anything is dated now counts from 1900, and the calendar's last day from the one
    before it."""
    async with serving(store, tmp_path) as api:
        await api.post("/v1/signals", json=OBSERVATION, params={"wait": 5})
        for horizon, found in (
            ("0001-01-01", ["likes figs"]),
            ("0001-01-01T00:00:00Z", ["likes figs"]),
            ("9999-12-31", []),
            ("9999-12-31T23:59:59Z", []),
        ):
            for path in ("/v1/recall", "/v1/context"):
                answer = await api.get(path, params={"about": "figs", "horizon": horizon})
                assert answer.status_code == 200, (path, horizon, answer.text)
            recalled = await api.get("/v1/recall", params={"about": "figs", "horizon": horizon})
            assert [m["observation"] for m in recalled.json()["marks"]] == found, horizon
        refused = await api.get(
            "/v1/recall", params={"about": "figs", "horizon": "0001-01-01T00:30:00+01:00"}
        )
        assert refused.status_code == 422 and "horizon" in refused.text
