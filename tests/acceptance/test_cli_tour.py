"""The README's tour is a test: every ``$ command`` in its ``console`` blocks runs, in order,
against a real daemon configured by the tour's own ``toml`` block, and prints what the
README shows.

Outputs are compared after replacing what legitimately varies with the placeholders the
README uses (it explains them too):

- ``~/cambium``: the tour's directory (here a temporary one);
- ``<signal-id>``, ``<mark-id>``, ``<seed-id>``: generated ids;
- ``<time>``: an instant; ``<uptime>``: how long the daemon has run; ``<version>``: its
  version; ``<strength>``: a mark's exact current strength in JSON (the readable view
  rounds it to two decimals, and those digits are compared);

and after collapsing runs of blanks (and of table rules) into one, since a placeholder is
narrower than what it stands for. In a command, an id placeholder means the first such id
in the latest output that printed one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from daemon import __version__
from daemon.testing import DaemonHome, running

pytestmark = pytest.mark.subprocess  # starts `cambium` as a subprocess

README = Path(__file__).resolve().parents[2] / "README.md"
TOUR_HOME = "~/cambium"
IDS = {
    "<signal-id>": re.compile(r"\b[0-9a-f]{32}\b"),
    "<mark-id>": re.compile(r"\bmk_[0-9a-f]{24}\b"),
    "<seed-id>": re.compile(r"\bsd_[0-9a-f]{24}\b"),
}
VARYING = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<time>"),  # JSON: UTC
    # Read by a person: in the configured zone, labelled (CEST, UTC, +03).
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (?:[A-Z]{2,5}|[+-]\d\d(?:\d\d)?)\b"), "<time>"),
    (re.compile(r"\bup (\d+ days?, )?\d+:\d\d:\d\d"), "up <uptime>"),
    (re.compile(r'"current_strength": [0-9.]+'), '"current_strength": <strength>'),
    (re.compile(re.escape(__version__) + r"(?=,)"), "<version>"),
]


@dataclass
class Step:
    command: str
    expected: str


def tour() -> tuple[str, list[Step]]:
    """The tour's config, and its steps in order."""
    text = README.read_text(encoding="utf-8")
    region = text[text.index("<!-- tour:start -->") : text.index("<!-- tour:end -->")]
    blocks = re.findall(r"^```(\w+)\n(.*?)^```$", region, flags=re.M | re.S)
    [config] = [body for language, body in blocks if language == "toml"]
    steps: list[Step] = []
    for language, body in blocks:
        if language != "console":
            continue
        lines = body.splitlines()
        while lines:
            command = lines.pop(0).removeprefix("$ ")
            while command.endswith("\\"):  # a command continued on the next line
                command += "\n" + lines.pop(0)
            output = []
            while lines and not lines[0].startswith("$ "):
                output.append(lines.pop(0))
            steps.append(Step(command, "\n".join(output)))
    return config, steps


def normalize(text: str) -> str:
    for pattern, placeholder in VARYING:
        text = pattern.sub(placeholder, text)
    lines = (re.sub(r"─+", "─", re.sub(r"[ \t]+", " ", line)).rstrip() for line in text.split("\n"))
    return "\n".join(lines).strip("\n")


def test_the_readme_tour_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, steps = tour()
    assert len(steps) >= 12, "the tour has lost its steps"
    # The tour's user is ada, with the installed cambium, on a terminal wide enough that
    # the long temporary paths (which the README shows as ~/cambium) do not wrap.
    monkeypatch.setenv("LOGNAME", "ada")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    home = DaemonHome(tmp_path)
    home.config.write_text(config, encoding="utf-8")
    latest: dict[str, str] = {}  # placeholder -> the id it stands for in commands
    with running(home):
        for step in steps:
            command = step.command
            for placeholder, value in latest.items():
                command = command.replace(placeholder, value)
            result = subprocess.run(
                ["bash", "-c", command],
                cwd=home.root,
                env=home.env(),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert (result.returncode, result.stderr) == (0, ""), f"$ {command}\n{result}"
            output = result.stdout.replace(str(home.root), TOUR_HOME)
            for placeholder, pattern in IDS.items():
                found = pattern.search(output)
                if found:
                    latest[placeholder] = found[0]
                output = pattern.sub(placeholder, output)
            assert normalize(output) == normalize(step.expected), f"$ {step.command}"
