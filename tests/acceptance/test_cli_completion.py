"""``cambium completion``: the script click writes, sourced by a real bash, completes
``cambium mem<TAB>`` to ``memory`` (click's ``_CAMBIUM_COMPLETE=bash_complete`` protocol)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from daemon.testing import CAMBIUM

pytestmark = pytest.mark.subprocess


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_bash_completes_memory_for_mem() -> None:
    script = subprocess.run(
        [CAMBIUM, "completion", "bash"], capture_output=True, text=True, check=True
    ).stdout
    # What bash does on `cambium mem<TAB>`: the words so far, the index of the one being
    # completed, then the completion function, with the command's path as its $1.
    driver = (
        f"{script}\n"
        "COMP_WORDS=(cambium mem); COMP_CWORD=1\n"
        f'_cambium_completion "{CAMBIUM}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    offered = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", driver], capture_output=True, text=True
    )
    assert offered.returncode == 0, offered.stderr
    assert offered.stdout.split() == ["memory"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_call_cambium_back(shell: str) -> None:
    script = subprocess.run(
        [CAMBIUM, "completion", shell], capture_output=True, text=True, check=True
    ).stdout
    assert f"_CAMBIUM_COMPLETE={shell}_complete" in script
