"""``cambium mcp``: the memory as Model Context Protocol tools, served on stdio.

An MCP client (a coding agent, a chat app) starts ``cambium mcp`` and calls its tools:
``recall``, ``context``, ``observe``, ``note``, ``plant_seed``, ``list_seeds``. The server
holds no memory of its own: every call goes to the running daemon through
:class:`daemon.client.AsyncClient`, so writes are signals like any other, durable and in the
audit trail, with the MCP client's name (from its ``initialize`` handshake) as their
``source_id``.

Tool arguments are checked against the models the API itself uses (recall's query, the
receptors' payload contracts), and their JSON schemas are what ``tools/list`` shows. Every
failure, a bad argument, a daemon that is down, comes back as a tool error whose text a
model can act on; the server itself keeps running.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from pydantic import ValidationError

from daemon import __version__
from daemon.client import AsyncClient, DaemonError, NotReachable, OutcomeUnknown, Rejected
from daemon.core.errors import describe, field_errors
from daemon.core.signal import NAME_PATTERN
from daemon.mcp.actions import ToolFailure
from daemon.mcp.framing import CheckedLines
from daemon.mcp.tools import INSTRUCTIONS, TOOLS

FALLBACK_SOURCE_ID = "mcp-client"
_NOT_A_NAME_CHARACTER = re.compile(r"[^A-Za-z0-9._:@/-]+")


def source_id_for(client_name: str | None) -> str:
    """The MCP client's name as a signal ``source_id`` (which allows fewer characters)."""
    name = _NOT_A_NAME_CHARACTER.sub("-", (client_name or "").strip()).strip("-._:@/")[:128]
    return name if re.fullmatch(NAME_PATTERN, name) else FALLBACK_SOURCE_ID


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def _explain(exc: Exception) -> str:
    if isinstance(exc, NotReachable):
        return f"the memory daemon is not running or not reachable: {exc}. Nothing was stored."
    if isinstance(exc, OutcomeUnknown):
        return (
            f"the memory daemon got the request but did not answer; it may be stored. "
            f"Call again with idempotency_key={exc.idempotency_key!r} to be sure."
        )
    if isinstance(exc, Rejected) and exc.errors:
        return "bad arguments: " + "; ".join(f"{e.field}: {e.message}" for e in exc.errors)
    if isinstance(exc, DaemonError):
        return f"the memory daemon refused it ({exc.status}): {exc.detail}"
    return str(exc)


def build_server(socket: Path) -> Server[Any]:
    clients: dict[str, AsyncClient] = {}

    def client_for(ctx: ServerRequestContext[Any]) -> AsyncClient:
        params = ctx.session.client_params
        source_id = source_id_for(params.client_info.name if params else None)
        if source_id not in clients:
            clients[source_id] = AsyncClient(socket, source_id=source_id)
        return clients[source_id]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool.listing() for tool in TOOLS.values()])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = TOOLS.get(params.name)
        if tool is None:
            return _error(f"no tool {params.name!r}; the tools are {', '.join(TOOLS)}")
        try:
            args = tool.arguments.model_validate(params.arguments or {})
        except ValidationError as exc:
            problems = describe(field_errors(exc.errors()))
            return _error(f"bad arguments: {problems}")
        try:
            text = await tool.run(client_for(ctx), args)
        except (DaemonError, NotReachable, OutcomeUnknown, ToolFailure) as exc:
            return _error(_explain(exc))
        return types.CallToolResult(content=[types.TextContent(text=text)])

    return Server(
        "cambium-memory",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(socket: Path) -> None:
    """Serve MCP on stdin/stdout until the client closes them; every malformed line is
    answered (see :mod:`daemon.mcp.framing`)."""
    server = build_server(socket)
    lines = CheckedLines(sys.stdin.buffer)
    # The SDK reads any async iterator of lines; it is typed as an open file.
    stdin = cast("anyio.AsyncFile[str]", lines)
    async with stdio_server(stdin=stdin) as (read_stream, write_stream):
        lines.answer_on(write_stream)
        await server.run(read_stream, write_stream, server.create_initialization_options())
