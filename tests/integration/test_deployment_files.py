"""The reference deployment's unit and agent are the templates ``cambium service install``
renders, byte for byte."""

from __future__ import annotations

import plistlib
from pathlib import Path

from daemon.service_files import Sandbox, render_agent, render_unit

REPO = Path(__file__).resolve().parents[2]


def test_the_reference_deployment_is_the_same_templates_rendered() -> None:
    deployment = REPO / "deployments" / "obadiah"
    unit = render_unit(
        "%h/.local/bin/cambium",
        "%h/Projects/Obadiah/cambium.toml",
        Sandbox(
            ["%h/.local/share/cambium", "%h/Projects/Obadiah/memory/daily"],
            runtime_directory=True,  # the socket: $XDG_RUNTIME_DIR/cambium, the default
            network=False,
        ),
    )
    assert (deployment / "cambium.service").read_text() == unit
    joshua = "/Users/joshua"
    agent = render_agent(
        f"{joshua}/.local/bin/cambium",
        f"{joshua}/Projects/Obadiah/cambium.toml",
        f"{joshua}/Library/Logs",
    )
    assert (deployment / "com.cambium.memory.plist").read_text() == agent
    assert plistlib.loads(agent.encode())["Label"] == "com.cambium.memory"
