"""The layers, checked from the source: who may import whom (parsed with ``ast``, so an
import inside a function counts as much as one at the top).

    core  <-  store, files  <-  bus  <-  services  <-  receptors, rhythms, api  <-  process
                                                                   cli (the entry point)

``daemon.process`` is the only composition root: it alone puts receptors, the bus, the API
and the rhythms together.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIRST_PARTY = ("daemon", "receptors", "rhythms")

CORE = {"daemon.core"}
STORE = CORE | {"daemon.store"}
FILES = CORE | {"daemon.files"}
BUS = STORE | {"daemon.bus"}
SERVICES = BUS | FILES | {"daemon.services", "daemon.config"}

# Layer (a module prefix) -> the prefixes its modules may import. The longest prefix wins.
ALLOWED: dict[str, set[str]] = {
    "daemon.core": CORE,
    "daemon.store": STORE,
    "daemon.files": FILES,
    "daemon.bus": BUS,
    "daemon.config": CORE | {"daemon.config", "rhythms.template"},
    "daemon.services": SERVICES,
    "receptors": SERVICES | {"receptors"},
    "rhythms": STORE | {"rhythms"},
    "daemon.api": SERVICES | {"daemon", "daemon.api", "daemon.loom.routes"},
    "daemon.loom": SERVICES | {"daemon", "daemon.loom", "daemon.api.deps", "daemon.api.server"},
    "daemon.process": SERVICES
    | {"daemon", "daemon.api", "daemon.process", "daemon.logs", "daemon.sdnotify"}
    | {"receptors", "rhythms"},
    "daemon.cli": SERVICES
    | {"daemon", "daemon.cli", "daemon.process", "daemon.api.server", "daemon.logs"}
    | {"daemon.loom.door", "daemon.client", "daemon.mcp_server", "daemon.service_files"}
    | {"rhythms"},
    # The public client: what it sends is checked with the core's rules; config finds the
    # socket. Nothing of the daemon's inside.
    "daemon.client": CORE | {"daemon.client", "daemon.config"},
    # The MCP server reaches the daemon through the client only; its tools' input schemas
    # are the receptors' payload contracts.
    "daemon.mcp_server": CORE
    | {"daemon", "daemon.client", "daemon.services.context", "daemon.services.recall"}
    | {"receptors.daily_note", "receptors.observation", "receptors.seeds"},
    "daemon.service_files": set(),
    "daemon.logs": set(),
    "daemon.testing": set(),  # the daemon as a subprocess: nothing of ours imported
    "daemon.sdnotify": set(),
    "daemon": set(),  # the package's own __init__: the version, and nothing else
}


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name.split(".")[0] in FIRST_PARTY}


def layer_of(module: str) -> str | None:
    matches = [layer for layer in ALLOWED if module == layer or module.startswith(layer + ".")]
    return max(matches, key=len) if matches else None


def within(name: str, prefixes: set[str]) -> bool:
    # "daemon" itself (the version) is allowed by exact name only, never as a prefix.
    return any(name == p or (p != "daemon" and name.startswith(p + ".")) for p in prefixes)


def violations(root: Path) -> list[str]:
    """Every import that crosses a layer the wrong way, as ``module -> imported``."""
    found = []
    for package in FIRST_PARTY:
        for path in sorted((root / package).rglob("*.py")):
            module = module_name(root, path)
            layer = layer_of(module)
            if layer is None:
                found.append(f"{module}: in no layer")
                continue
            found.extend(
                f"{module} -> {name}"
                for name in sorted(imports_of(path))
                if not within(name, ALLOWED[layer])
            )
    return found


def test_the_tree_keeps_its_layers() -> None:
    assert violations(REPO) == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("daemon/store/leak.py", "from daemon.api.app import create_app\n"),
        ("daemon/core/leak.py", "import daemon.store\n"),
        ("daemon/bus/leak.py", "def later() -> None:\n    from daemon.cli import main\n"),
        ("receptors/leak.py", "from daemon.process import run_daemon\n"),
        ("daemon/files/leak.py", "from daemon.store import Store\n"),
    ],
)
def test_a_synthetic_violation_is_caught(tmp_path: Path, module: str, source: str) -> None:
    for package in FIRST_PARTY:
        (tmp_path / package).mkdir()
    (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / module).write_text(source)
    found = violations(tmp_path)
    assert len(found) == 1 and found[0].startswith(module_name(tmp_path, tmp_path / module))


def test_only_the_process_composes_the_daemon() -> None:
    composers = [
        module_name(REPO, path)
        for package in FIRST_PARTY
        for path in (REPO / package).rglob("*.py")
        if "receptors" in imports_of(path) and not module_name(REPO, path).startswith("receptors")
    ]
    assert composers == ["daemon.process"]
