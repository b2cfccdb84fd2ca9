"""``cambium mcp``: serve the memory to an MCP client on stdio."""

from __future__ import annotations

from pathlib import Path

import click

from daemon.cli.common import config_option


@click.command()
@config_option
def mcp(config_path: Path | None) -> None:
    """Serve the memory as MCP tools on stdin/stdout, for an MCP client to start.

    Tools: recall, context, observe, note, plant_seed, list_seeds. Every call goes to
    the running daemon (start it with `cambium run`); writes carry the MCP client's name
    as their source. Logs go to stderr; stdout belongs to the protocol.

    \b
    Example (an MCP client's config):
      {"mcpServers": {"cambium": {"command": "cambium", "args": ["mcp"]}}}
    """
    import anyio

    from daemon.cli.client import daemon_socket
    from daemon.mcp.server import serve_stdio

    anyio.run(serve_stdio, daemon_socket(config_path))
