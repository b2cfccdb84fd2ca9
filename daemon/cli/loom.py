"""``cambium loom``: open Loom, the daemon's web inspector, in a browser."""

from __future__ import annotations

from pathlib import Path

import click

from daemon.cli.common import config_option, load


@click.command()
@click.option(
    "--print-url", is_flag=True, help="Only print the link; do not try to open a browser."
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Loopback port to listen on (0: any free port).",
)
@click.option(
    "--idle-minutes",
    type=click.FloatRange(min=0.1),
    default=30,
    show_default=True,
    help="Stop after this long without a request.",
)
@config_option
def loom(print_url: bool, port: int, idle_minutes: float, config_path: Path | None) -> None:
    """Open Loom, the memory's web inspector, in your browser.

    The daemon serves Loom on its Unix socket. This opens a short-lived door to it on
    127.0.0.1 and a one-time link: the first browser to open the link gets in, nobody
    else. It stops on Ctrl-C or after --idle-minutes without a request. Exit 3 when the
    daemon is not reachable.

    \b
    Examples:
      cambium loom
      cambium loom --print-url
    """
    import anyio

    from daemon.cli.client import daemon
    from daemon.loom.door import serve_door

    config = load(config_path)
    with daemon(config, "loom") as client:
        client.health()  # exit 3 now rather than a 502 in the browser
    anyio.run(serve_door, config.ingress.socket, port, idle_minutes * 60, not print_url)
