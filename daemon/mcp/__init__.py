"""``cambium mcp``: the memory as Model Context Protocol tools, served on stdio (see
:mod:`daemon.mcp.server`)."""

__all__: list[str] = []
