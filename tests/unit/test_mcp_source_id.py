"""How an MCP client's name becomes the source id its signals carry."""

from __future__ import annotations

from daemon.mcp.server import source_id_for


def test_a_client_name_becomes_a_valid_source_id() -> None:
    assert source_id_for("Claude Desktop") == "Claude-Desktop"
    assert source_id_for("cursor/1.2") == "cursor/1.2"
    assert source_id_for("") == "mcp-client"
    assert source_id_for("???") == "mcp-client"
