"""`cambium --help` imports none of its commands: they load when one runs."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from daemon.cli.main import ATTACHED, COMMANDS, cli

# What `cambium --help` must not import: each costs tens to hundreds of milliseconds.
HEAVY = ("sqlalchemy", "fastapi", "daemon.store", "daemon.bus", "mcp", "onnxruntime")
# ... nor these, which every command module pulls in (through the config).
LIGHT_BUT_SLOW = ("pydantic", "daemon.config", "httpx", "rich")

_HELP_THEN_MODULES = """
import json, sys
from daemon.cli.main import main
sys.argv = ["cambium", "--help"]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


@pytest.mark.subprocess
def test_help_imports_no_command_module() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _HELP_THEN_MODULES], capture_output=True, text=True, check=True
    )
    imported = json.loads(result.stderr.strip().splitlines()[-1])
    unwanted = [
        module
        for module in imported
        if any(module == name or module.startswith(name + ".") for name in HEAVY + LIGHT_BUT_SLOW)
    ]
    assert unwanted == []
    assert "Commands:" in result.stdout and "memory" in result.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_listed_summary_is_the_commands_own(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    assert command.name == name
    first_paragraph = (command.help or "").split("\n\n")[0].replace("\n", " ")
    assert COMMANDS[name][2] == first_paragraph


def test_attached_commands_join_their_group() -> None:
    for group_name, (_, names) in ATTACHED.items():
        group = cli.get_command(click.Context(cli), group_name)
        assert isinstance(group, click.Group)
        assert {group.commands[n].name for n in names} <= set(
            group.list_commands(click.Context(group))
        )


def test_an_unknown_command_is_refused() -> None:
    assert cli.get_command(click.Context(cli), "nope") is None
