"""``cambium mcp`` for real: the server started as a subprocess speaking stdio, driven by the
``mcp`` package's own client, against a real daemon (``cambium run``) on a real socket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from daemon.testing import CAMBIUM, DaemonHome, running

CLIENT_NAME = "test-agent"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHome]:
    home = DaemonHome(tmp_path_factory.mktemp("mcp"))
    with running(home):
        yield home


@asynccontextmanager
async def mcp_session(home: DaemonHome) -> AsyncIterator[ClientSession]:
    server = StdioServerParameters(
        command=CAMBIUM, args=["mcp", "--config", str(home.config)], env=home.env()
    )
    with (home.root / "mcp.stderr").open("a") as errors:
        async with (
            stdio_client(server, errlog=errors) as (read, write),
            ClientSession(
                read,
                write,
                client_info=types.Implementation(name=CLIENT_NAME, version="1.0"),
            ) as session,
        ):
            await session.initialize()
            yield session


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.asyncio
async def test_the_tools_are_listed_with_schemas_from_the_api_models(daemon: DaemonHome) -> None:
    async with mcp_session(daemon) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {
        "recall", "context", "observe", "note", "plant_seed", "list_seeds", "correct", "forget",
        "get_mark", "recent_changes", "discard_dead",
    }  # fmt: skip
    for tool in tools.values():
        assert tool.description and len(tool.description) > 80, f"{tool.name}: say what it is for"
        assert tool.input_schema["type"] == "object"
    observe = tools["observe"].input_schema
    assert set(observe["required"]) == {"subject", "observation"}
    assert observe["properties"]["subject"]["description"].startswith("A dot path")
    assert tools["context"].input_schema["properties"]["max_chars"]["minimum"] == 200
    assert tools["recall"].annotations is not None and tools["recall"].annotations.read_only_hint
    assert tools["forget"].annotations is not None and tools["forget"].annotations.destructive_hint


@pytest.mark.asyncio
async def test_observe_then_recall_shows_the_mark_written_as_the_client(
    daemon: DaemonHome,
) -> None:
    async with mcp_session(daemon) as session:
        stored = await session.call_tool(
            "observe",
            {"subject": "user.food.lunch", "observation": "likes lentil soup"},
        )
        assert not stored.is_error, text_of(stored)
        assert "observation about user.food.lunch: stored" in text_of(stored)
        found = await session.call_tool("recall", {"about": "lentil", "layers": ["marks"]})
    assert not found.is_error, text_of(found)
    marks = json.loads(text_of(found))["marks"]
    assert [(m["subject"], m["observation"]) for m in marks] == [
        ("user.food.lunch", "likes lentil soup")
    ]
    assert marks[0]["observed_by"] == CLIENT_NAME, "the source is the MCP client's name"


@pytest.mark.asyncio
async def test_context_respects_max_chars_and_never_cuts_an_item(daemon: DaemonHome) -> None:
    observations = [f"enjoys hiking trail number {n} on sunny mornings" for n in range(40)]
    async with mcp_session(daemon) as session:
        for n, text in enumerate(observations):
            result = await session.call_tool(
                "observe", {"subject": f"user.hobby.hiking.t{n}", "observation": text}
            )
            assert not result.is_error, text_of(result)
        blocks = {}
        for limit in (200, 1000, 8000):
            result = await session.call_tool(
                "context", {"about": "user.hobby", "max_chars": limit, "limit": 50}
            )
            assert not result.is_error, text_of(result)
            blocks[limit] = text_of(result)
    for limit, block in blocks.items():
        assert len(block) <= limit
        lines = block.splitlines()
        assert lines[0].startswith("<<<memory") and lines[-1] == "<<<end memory>>>"
        items = [line for line in lines[1:-1] if line.startswith("[mark")]
        for line in items:  # each item whole: it ends with its full observation
            assert any(line.endswith(text) for text in observations), line
    assert len(blocks[200].splitlines()) < len(blocks[1000].splitlines())
    assert sum(line.startswith("[mark") for line in blocks[8000].splitlines()) == 40


@pytest.mark.asyncio
async def test_bad_arguments_come_back_as_a_tool_error(daemon: DaemonHome) -> None:
    async with mcp_session(daemon) as session:
        missing = await session.call_tool("observe", {"subject": "user.food"})
        bad_limit = await session.call_tool("context", {"about": "x", "max_chars": 10})
        unknown = await session.call_tool("forget_everything", {})
        still_serving = await session.call_tool("list_seeds", {})
    assert missing.is_error and "observation" in text_of(missing)
    assert bad_limit.is_error and "max_chars" in text_of(bad_limit)
    assert unknown.is_error and "recall" in text_of(unknown)
    assert not still_serving.is_error and json.loads(text_of(still_serving)) == []


@pytest.mark.asyncio
async def test_a_daemon_that_is_down_gives_a_tool_error_saying_so(tmp_path: Path) -> None:
    home = DaemonHome(tmp_path)  # configured, never started
    async with mcp_session(home) as session:
        result = await session.call_tool("recall", {"about": "lentil"})
        write = await session.call_tool("note", {"text": "went for a run"})
    assert result.is_error and "not running or not reachable" in text_of(result)
    assert write.is_error and "Nothing was stored" in text_of(write)


@pytest.mark.asyncio
async def test_correct_then_forget_through_the_tools(daemon: DaemonHome) -> None:
    async with mcp_session(daemon) as session:
        await session.call_tool(
            "observe", {"subject": "user.pets.cat", "observation": "has a cat called Miso"}
        )
        found = await session.call_tool("recall", {"about": "user.pets", "layers": ["marks"]})
        [mark] = json.loads(text_of(found))["marks"]
        corrected = await session.call_tool(
            "correct",
            {"mark_id": mark["id"], "text": "has a cat called Mochi", "reason": "misheard"},
        )
        assert not corrected.is_error, text_of(corrected)
        now = await session.call_tool("recall", {"about": "user.pets", "layers": ["marks"]})
        assert [m["observation"] for m in json.loads(text_of(now))["marks"]] == [
            "has a cat called Mochi"
        ]
        both = await session.call_tool(
            "forget", {"subject": "user.pets", "mark_id": "x", "reason": "r"}
        )
        assert both.is_error and "exactly one of subject and mark_id" in text_of(both)
        forgotten = await session.call_tool(
            "forget", {"subject": "user.pets", "reason": "the user asked"}
        )
        assert not forgotten.is_error, text_of(forgotten)
        after = await session.call_tool("recall", {"about": "user.pets", "layers": ["marks"]})
    assert json.loads(text_of(after))["marks"] == []
