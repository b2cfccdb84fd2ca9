"""Issue 26, finding 9: under systemd each log line carries its syslog priority, so that
journald stores warnings and errors as such (``journalctl -p warning`` finds them); it
stored every line at priority 6. Logging is set up in a child process, as the daemon does,
with its output going to a file that JOURNAL_STREAM names (as systemd names the socket)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import logging, structlog
from daemon.logs import configure_logging
configure_logging("debug")
log = structlog.get_logger("cambium.test")
log.debug("a detail"); log.info("started"); log.warning("no substrate"); log.error("failed")
logging.getLogger("uvicorn.error").error("from a library")
"""


def run_logging(output: Path, journal_stream: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
    with output.open("w") as stream:
        if journal_stream is not None:
            info = os.fstat(stream.fileno())
            env["JOURNAL_STREAM"] = journal_stream.format(dev=info.st_dev, ino=info.st_ino)
        subprocess.run(
            [sys.executable, "-c", SCRIPT], stdout=stream, stderr=stream, env=env, check=True
        )
    return output.read_text().splitlines()


def test_under_journald_each_line_starts_with_its_priority(tmp_path: Path) -> None:
    lines = run_logging(tmp_path / "journal", "{dev}:{ino}")
    assert [line[:4] for line in lines[:4]] == ["<7>{", "<6>{", "<4>{", "<3>{"]
    assert '"event": "failed"' in lines[3]
    assert lines[4] == "<3>ERROR:uvicorn.error:from a library"


def test_elsewhere_lines_carry_no_prefix(tmp_path: Path) -> None:
    for stream in (None, "1:2"):  # not under systemd; a journal stream that is not this file
        lines = run_logging(tmp_path / "log", stream)
        assert lines[0].startswith("{") and lines[-1] == "ERROR:uvicorn.error:from a library"
