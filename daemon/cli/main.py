"""``cambium``: run the daemon, and read and review its memory from the terminal.

Exit codes: 0 ok; 1 failed; 2 bad input; 3 daemon not reachable; 4 a write was sent but
no answer came (it may be stored: re-run it with the printed ``--idempotency-key``).

``status`` and ``memory recall`` ask the running daemon (it holds the warm index and the
model); with the daemon down, recall reads the store's index as it is, read-only. The other
read commands (``memory seeds``, ``memory substrate``, ``signals``) read the store and the
files directly, daemon running or not. Write commands (``emit``, ``memory
mark|note|consolidate``, ``memory seeds accept|reject``, ``signals retry``) talk to the
daemon over its Unix socket.

The commands load lazily: ``cambium --help`` lists them from :data:`COMMANDS` and imports
none of them, so it answers in the time Python takes to start; a read the daemon answers
imports the client's wire and the rendering, not pydantic, httpx or the store
(:mod:`daemon.cli.client`).
"""

from __future__ import annotations

import importlib

import click

# name -> (module, attribute, the first paragraph of the command's help, shown in the list).
# tests/test_cli_lazy.py checks each summary against the command it names.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "completion": (
        "daemon.cli.completion",
        "completion",
        "Print the completion script for SHELL; load it from your shell's startup file.",
    ),
    "config": ("daemon.cli.config_show", "config", "The configuration."),
    "db": ("daemon.cli.daemon_commands", "db", "The database."),
    "doctor": (
        "daemon.cli.doctor",
        "doctor",
        "Check that everything this config needs is in place; exit 1 if anything is not.",
    ),
    "emit": ("daemon.cli.daemon_commands", "emit", "Emit a signal, as an agent or script would."),
    "export": (
        "daemon.cli.archive",
        "export",
        "Write the whole memory to one archive file at PATH.",
    ),
    "import": (
        "daemon.cli.archive",
        "import_archive",
        "Add an archive written by `cambium export` to this memory.",
    ),
    "index": (
        "daemon.cli.index",
        "index",
        "The text index recall ranks from (every layer's texts, in the store).",
    ),
    "init": ("daemon.cli.setup", "init", "Set up a memory in DIR (default: here)."),
    "loom": ("daemon.cli.loom", "loom", "Open Loom, the memory's web inspector, in your browser."),
    "mcp": (
        "daemon.cli.mcp",
        "mcp",
        "Serve the memory as MCP tools on stdin/stdout, for an MCP client to start.",
    ),
    "memory": (
        "daemon.cli.memory",
        "memory",
        "Recall and review what the memory knows; add to it by hand.",
    ),
    "run": (
        "daemon.cli.daemon_commands",
        "run",
        "Run the daemon in the foreground (systemd and launchd supervise it; it never forks).",
    ),
    "service": (
        "daemon.cli.setup",
        "service",
        "Run the daemon as a service of your login (systemd user unit, launchd agent).",
    ),
    "signals": (
        "daemon.cli.signals",
        "signals",
        "The signal log: list signals, show one, retry one.",
    ),
    "status": ("daemon.cli.daemon_commands", "status", "Is the daemon up, and what is it doing?"),
}

# Commands that live beside a group's own: group -> (module, attributes).
ATTACHED: dict[str, tuple[str, tuple[str, ...]]] = {
    "memory": ("daemon.cli.governance", ("correct", "retract", "forget", "tombstones")),
}


def _attribute(module: str, name: str) -> click.Command:
    command = getattr(importlib.import_module(module), name)
    assert isinstance(command, click.Command)
    return command


class LazyGroup(click.Group):
    """A group whose commands are imported only when one of them runs (or shows its help)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, name, _ = COMMANDS[cmd_name]
        command = _attribute(module, name)
        if cmd_name in ATTACHED and isinstance(command, click.Group):
            attached_module, names = ATTACHED[cmd_name]
            for attached in names:
                command.add_command(_attribute(attached_module, attached))
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # As click's own, with each summary from the table instead of the imported command.
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [
            (name, click.Command(name, help=summary).get_short_help_str(limit))
            for name, (_, _, summary) in sorted(COMMANDS.items())
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cambium-memory", prog_name="cambium")
def cli() -> None:
    """Cambium Memory: a local daemon that gives your assistant a memory that lasts.

    Exit codes: 0 ok, 1 failed, 2 bad input, 3 daemon not reachable, 4 sent but outcome
    unknown (re-run with the printed --idempotency-key).
    """


def main() -> None:
    cli(prog_name="cambium")
