"""``cambium completion bash|zsh|fish``: the shell completion script (click's own)."""

from __future__ import annotations

import click

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_CAMBIUM_COMPLETE"  # the variable click's scripts call `cambium` back with


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script for SHELL; load it from your shell's startup file.

    \b
    Examples:
      eval "$(cambium completion bash)"     # in ~/.bashrc
      eval "$(cambium completion zsh)"      # in ~/.zshrc
      cambium completion fish > ~/.config/fish/completions/cambium.fish
    """
    from click.shell_completion import get_completion_class

    root = click.get_current_context().find_root()
    script_class = get_completion_class(shell)
    assert script_class is not None  # one of click's own shells
    script = script_class(root.command, {}, root.info_name or "cambium", COMPLETE_VAR)
    click.echo(script.source())
