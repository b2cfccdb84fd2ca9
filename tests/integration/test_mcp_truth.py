"""The MCP tools say what is so: only the reads are idempotent, ``observe`` says which mark
it made or reinforced, a mark can be read back with its history, recent changes listed, and
the argument names agents habitually use are taken. The tools run in process, against the
real app through httpx's ASGITransport (tests/test_mcp.py drives the stdio server itself)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import T0
from test_edges import dead_notes, doors

from daemon.client import AsyncClient
from daemon.mcp.tools import TOOLS
from daemon.store import Store


async def call(client: AsyncClient, name: str, arguments: dict[str, Any]) -> str:
    tool = TOOLS[name]
    return await tool.run(client, tool.arguments.model_validate(arguments))


def test_only_the_reads_say_they_are_idempotent() -> None:
    hinted = {name: tool.listing()["annotations"] for name, tool in TOOLS.items()}
    idempotent = {name for name, hints in hinted.items() if hints["idempotentHint"]}
    assert idempotent == {"recall", "context", "list_seeds", "get_mark", "recent_changes"}
    assert all(hints["readOnlyHint"] for name, hints in hinted.items() if name in idempotent)
    key = TOOLS["observe"].listing()["inputSchema"]["properties"]["idempotency_key"]
    assert "every call counts" in key["description"]


@pytest.mark.asyncio
async def test_observe_says_which_mark_it_made_or_reinforced_and_get_mark_shows_it(
    store: Store, tmp_path: Path
) -> None:
    async with doors(store, tmp_path) as edge:
        said = await call(edge.client, "observe", {"subject": "user.food", "fact": "likes figs"})
        mark_id = said.rsplit("made mark ", 1)[1]
        again = await call(edge.client, "observe", {"topic": "user.food", "text": "likes figs"})
        assert again.endswith(f"reinforced mark {mark_id}")

        shown = await edge.client.mark(mark_id)
        assert shown["mark"]["observation"] == "likes figs"
        assert shown["mark"]["evidence"]["note"] == "observed by edge"
        assert [r["reinforced_by"] for r in shown["reinforcements"]] == ["edge"]
        await edge.client.correct(mark_id, "likes fresh figs", reason="said so")
        history = await call(edge.client, "get_mark", {"id": mark_id})
        assert '"likes fresh figs"' in history and '"state": "superseded"' in history

        recalled = await call(edge.client, "recall", {"query": "figs", "k": 5})
        assert "likes fresh figs" in recalled
        changed = await edge.client.changes(T0.isoformat())
        assert {m["observation"] for m in changed["marks_made"]} == {
            "likes figs",
            "likes fresh figs",
        }
        assert [r["mark_id"] for r in changed["marks_reinforced"]] == [mark_id]
        assert [m["id"] for m in changed["marks_ended"]] == [mark_id]
        tool = await call(edge.client, "recent_changes", {"after": T0.isoformat()})
        assert mark_id in tool


@pytest.mark.asyncio
async def test_a_dead_delivery_is_discarded_through_the_tool(store: Store, tmp_path: Path) -> None:
    async with doors(store, tmp_path) as edge:
        [dead] = await dead_notes(edge, tmp_path, "2026-01-20")
        said = await call(edge.client, "discard_dead", {"signal_id": dead})
        assert '"applied": true' in said
        [delivery] = (await edge.client.signal(dead)).deliveries
        assert delivery.status == "discarded"
        with pytest.raises(ValueError):
            TOOLS["discard_dead"].arguments.model_validate({"receptor": "daily"})
