"""Health sees failing writes: with the store's disk full, ``/v1/health`` is ``degraded``
and names the cause; once a write succeeds again it is ``ok``. In process (the real app,
bus and SQLite store through httpx's ASGITransport), on the small tmpfs of
``test_store_full`` (skipped, saying why, where it cannot be mounted)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from in_process import OBSERVATION, serving
from test_store_full import fill, small_disk, truncate_wal

from daemon.store import Store
from daemon.store.migrate import upgrade

__all__ = ["small_disk"]  # the fixture, used by name


async def emit(api: httpx.AsyncClient, n: int) -> int:
    signal = OBSERVATION | {"idempotency_key": f"health-{n}"}
    return (await api.post("/v1/signals", json=signal, params={"wait": 5})).status_code


async def health(api: httpx.AsyncClient) -> tuple[str, str | None]:
    answer = (await api.get("/v1/health")).json()
    return answer["status"], answer.get("problem")


@pytest.mark.asyncio
async def test_health_is_degraded_while_writes_fail_and_ok_once_they_succeed(
    small_disk: Path, tmp_path: Path
) -> None:
    database = small_disk / "cambium.db"
    url = f"sqlite:///{database}"
    upgrade(url)
    store = Store(url)
    store.start()
    try:
        async with serving(store, tmp_path) as api:
            assert await emit(api, 0) == 201
            assert await health(api) == ("ok", None)

            truncate_wal(database)
            ballast = fill(small_disk)
            assert await emit(api, 1) == 503
            status, problem = await health(api)
            assert status == "degraded"
            assert problem is not None and "database or disk is full" in problem
            assert str(database) in problem, "it names the store"

            ballast.unlink()
            assert await emit(api, 1) == 201
            assert await health(api) == ("ok", None)
    finally:
        store.close()
