"""What the CLI does on a terminal and what it does piped: piped text is never wrapped
(so ``grep`` finds every line whole); long jobs show progress on a terminal (a pseudo
terminal here) and nothing piped."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from daemon.cli.render import show, table
from daemon.testing import CAMBIUM, DaemonHome, running

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # colours and cursor moves
LONG = "word " * 60  # 300 characters: wrapped at 80 columns on a terminal

SHOW_A_LONG_ROW = f"""
from daemon.cli.render import show, table
rows = table("id", "text")
rows.add_row("id1", {LONG!r})
show(rows)
"""


def on_a_pty(command: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``command`` with stdout and stderr on a pseudo terminal 100 columns wide; its
    exit code and all it wrote."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal, env=env
    )
    os.close(terminal)
    output = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(controller)
    return process.wait(timeout=60), ANSI.sub("", output.decode(errors="replace"))


def test_a_long_line_piped_comes_out_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    rows = table("id", "text")
    rows.add_row("id1", LONG)
    show(rows)  # stdout is captured: not a terminal
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("id1")]
    assert line == f"id1   {LONG.strip()}"


@pytest.mark.subprocess
def test_the_same_line_on_a_terminal_wraps_to_its_width() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    code, output = on_a_pty([sys.executable, "-c", SHOW_A_LONG_ROW], env)
    assert code == 0, output
    wrapped = [line for line in output.splitlines() if "word" in line]
    assert len(wrapped) == 4 and max(len(line.rstrip()) for line in wrapped) <= 100


@pytest.mark.subprocess
def test_export_and_import_show_progress_on_a_terminal_only(tmp_path: Path) -> None:
    home = DaemonHome(tmp_path)
    assert home.cli("db", "upgrade").returncode == 0
    archive = tmp_path / "memory.tar"

    code, output = on_a_pty([CAMBIUM, "export", str(archive)], home.env())
    assert code == 0, output
    # A spinner's frame first where the terminal's encoding has one (not in the C locale);
    # the path may be cut to the terminal width.
    assert re.search(r"\r(\S )?exporting to ", output), output
    code, output = on_a_pty([CAMBIUM, "import", str(archive)], home.env())
    assert code == 0, output
    assert re.search(r"\r(\S )?importing ", output), output

    piped = home.cli("export", str(archive), "--force", "--json")
    assert piped.returncode == 0 and "exporting" not in piped.stderr + piped.stdout
    piped = home.cli("import", str(archive))
    assert piped.returncode == 0 and "importing" not in piped.stderr + piped.stdout


@pytest.mark.subprocess
def test_consolidating_through_a_date_shows_a_bar_on_a_terminal(tmp_path: Path) -> None:
    home = DaemonHome(tmp_path)
    with running(home):
        for day in ("2026-01-15", "2026-01-16"):
            noted = home.cli("memory", "note", "a line", "--date", day)
            assert noted.returncode == 0, noted.stderr
        code, output = on_a_pty(
            [CAMBIUM, "memory", "consolidate", "--through", "2026-01-16"], home.env()
        )
    assert code == 0, output
    assert "consolidating" in output and "0/2" in output  # the bar, drawn at once
    assert "consolidated 2026-01-15" in output and "consolidated 2026-01-16" in output
