"""``cambium mcp``: serve the memory to an MCP client on stdio."""

from __future__ import annotations

from pathlib import Path

import click

from daemon.cli.common import config_option, load


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

    from daemon.mcp.server import serve_stdio

    config = load(config_path)
    anyio.run(serve_stdio, config.ingress.socket)
