"""The Loom door in process (httpx's ASGITransport, no daemon): an entry ticket unused past
its lifetime lets nobody in."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from daemon.loom.proxy import COOKIE, LoomProxy


@pytest.mark.asyncio
async def test_a_ticket_expires_unused(tmp_path: Path) -> None:
    now = [1000.0]
    proxy = LoomProxy(tmp_path / "no.sock", "127.0.0.1", ticket_seconds=60, clock=lambda: now[0])
    entry = proxy.entry_path()
    transport = httpx.ASGITransport(app=proxy)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        now[0] += 61
        late = await client.get(entry)
        assert late.status_code == 403 and COOKIE not in late.headers.get("set-cookie", "")
