"""The layers, checked from the source: who may import whom (parsed with ``ast``, so an
import inside a function counts as much as one at the top).

    core  <-  store, files  <-  bus  <-  services  <-  receptors, rhythms, api, loom
                                                     <-  composition  <-  process
                                                                   cli (the entry point)
    core  <-  search  <-  files  (the file layers rank with the search package)
    core  <-  schema (the wire)  <-  services, client  <-  mcp   cli (the entry point)

``daemon.composition`` is the only composition root: it alone puts receptors, the bus, the
API, Loom and the rhythms together; ``daemon.process`` runs what it built. No import cycle,
lazy or not, between modules or between packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIRST_PARTY = ("daemon", "receptors", "rhythms")

CORE = {"daemon.core"}
STORE = CORE | {"daemon.store"}
# Text matching, fusion and the dense index; the semantic cache's files are made private
# by the file layers' one way to the disk.
SEARCH = CORE | {"daemon.search", "daemon.fs"}
FILES = CORE | {"daemon.files", "daemon.search", "daemon.fs"}
BUS = STORE | {"daemon.bus"}
# The config: its models, and the file they are read from (which the light clients read
# alone, for the socket).
CONFIG = {"daemon.config", "daemon.config_file"}
# The language-model client: an adapter to an outside endpoint, like the file layers.
LLM = CORE | CONFIG | {"daemon.llm"}
SERVICES = BUS | FILES | LLM | {"daemon.services", "daemon.schema"}

# Layer (a module prefix) -> the prefixes its modules may import. The longest prefix wins.
ALLOWED: dict[str, set[str]] = {
    "daemon.core": CORE,
    "daemon.store": STORE,
    "daemon.store.migrate": STORE | {"daemon.sdnotify"},  # the start timeout, while migrating
    "daemon.files": FILES,
    "daemon.search": SEARCH,
    "daemon.search.semantic": SEARCH | CONFIG,  # the [recall] model settings
    "daemon.bus": BUS,
    # The wire schema: the payload contracts, the recall query, the API's answers.
    "daemon.schema": CORE | {"daemon.schema"},
    "daemon.config": CORE | CONFIG | {"rhythms.template"},
    "daemon.config_file": CORE,
    "daemon.llm": LLM,
    "daemon.services": SERVICES,
    "receptors": SERVICES | {"receptors"},
    "rhythms": STORE | {"rhythms"},
    "daemon.api": SERVICES | {"daemon", "daemon.api"},
    "daemon.loom": SERVICES | {"daemon", "daemon.loom", "daemon.server"},
    "daemon.composition": SERVICES | {"daemon.api", "daemon.loom.routes", "receptors", "rhythms"},
    "daemon.process": SERVICES
    | {"daemon", "daemon.composition", "daemon.logs", "daemon.sdnotify", "daemon.server"},
    "daemon.cli": SERVICES
    | {"daemon", "daemon.cli", "daemon.process", "daemon.server", "daemon.logs"}
    | {"daemon.loom.door", "daemon.client", "daemon.mcp", "daemon.service_files"}
    | {"rhythms"},
    # The public client: what it sends is checked with the core's rules and the wire
    # schema; config finds the socket. Nothing of the daemon's inside.
    "daemon.client": CORE | CONFIG | {"daemon.client", "daemon.schema"},
    # The MCP server reaches the daemon through the client only; its tools' input schemas
    # are the wire schema's payload contracts and recall query.
    "daemon.mcp": CORE
    | {"daemon", "daemon.client", "daemon.config_file", "daemon.schema"}
    | {"daemon.mcp"},
    "daemon.service_files": set(),
    "daemon.logs": set(),
    # The one way the file layers and the search package touch the disk: nothing of ours.
    "daemon.fs": set(),
    # The daemon as a subprocess, and the waits and rules only tests need.
    "daemon.testing": BUS,
    "daemon.sdnotify": set(),
    "daemon.server": set(),  # sockets and uvicorn servers: the API's and Loom's door's
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


def test_only_the_composition_root_composes_the_daemon() -> None:
    # The app factory, Loom's mount and the receptors' package face are what composing takes.
    composing = {"daemon.api.app", "daemon.loom.routes", "receptors"}
    composers = [
        module_name(REPO, path)
        for package in FIRST_PARTY
        for path in (REPO / package).rglob("*.py")
        if composing & imports_of(path) and not module_name(REPO, path).startswith("receptors")
    ]
    assert composers == ["daemon.composition"]


# -- import cycles ------------------------------------------------------------------------


def import_graph(root: Path) -> dict[str, set[str]]:
    """Each first-party module -> the first-party modules it imports (anywhere in it: a lazy
    import inside a function counts). ``from p import name`` counts ``p.name`` when that is a
    module, else ``p``."""
    modules = {
        module_name(root, path)
        for package in FIRST_PARTY
        for path in (root / package).rglob("*.py")
    }

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for package in FIRST_PARTY:
        for path in (root / package).rglob("*.py"):
            names: list[str] = []
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names.extend(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names.extend(f"{node.module}.{alias.name}" for alias in node.names)
            module = module_name(root, path)
            graph[module] = {r for r in map(resolve, names) if r is not None} - {module}
    return graph


def package_graph(root: Path, graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph with each module folded into its package (``daemon``'s own modules,
    such as ``daemon.config``, each stand for themselves)."""

    def package(module: str) -> str:
        if (root / module.replace(".", "/")).is_dir():
            return module
        parent = module.rpartition(".")[0]
        return module if parent == "daemon" else parent

    folded: dict[str, set[str]] = {}
    for module, imported in graph.items():
        outside = {package(i) for i in imported} - {package(module)}
        folded.setdefault(package(module), set()).update(outside)
    return folded


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = lowest[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                lowest[node] = min(lowest[node], lowest[target])
            elif target in stack:
                lowest[node] = min(lowest[node], index[target])
        if lowest[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            if component:
                found.append(sorted([*component, node]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_cycle_between_modules_or_packages() -> None:
    graph = import_graph(REPO)
    assert cycles(graph) == []
    assert cycles(package_graph(REPO, graph)) == []


@pytest.mark.parametrize(
    ("files", "modules", "packages"),
    [
        (  # a lazy cycle between two modules of two packages
            {
                "receptors/a.py": "def f() -> None:\n    from receptors.llm.b import g\n",
                "receptors/llm/b.py": "from receptors import a\n",
            },
            [["receptors.a", "receptors.llm.b"]],
            [["receptors", "receptors.llm"]],
        ),
        (  # packages importing each other through different modules: no module cycle
            {
                "daemon/api/app.py": "from daemon.loom.routes import router\n",
                "daemon/loom/routes.py": "from daemon.api.deps import Running\n",
                "daemon/api/deps.py": "",
            },
            [],
            [["daemon.api", "daemon.loom"]],
        ),
        ({"daemon/x.py": "import daemon.y\n", "daemon/y.py": "import daemon.config\n"}, [], []),
    ],
)
def test_a_synthetic_cycle_is_caught(
    tmp_path: Path, files: dict[str, str], modules: list[list[str]], packages: list[list[str]]
) -> None:
    for package in FIRST_PARTY:
        (tmp_path / package).mkdir()
    for name, source in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    graph = import_graph(tmp_path)
    assert cycles(graph) == modules
    assert cycles(package_graph(tmp_path, graph)) == packages


# The store's inside stays inside: only its own modules touch its tables, and every other
# module imports the package face, or by name the two modules that load what the face must
# not (migrate: Alembic, for the CLI and the daemon's start; notify: psycopg, PostgreSQL only).
STORE_DOORS = {"daemon.store", "daemon.store.migrate", "daemon.store.notify"}


# One job per module and functions a reader can hold: the limits of issue 28. Migrations
# are history, written once and never read for their shape, so they are left out.
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60


def oversized(root: Path) -> list[str]:
    """Every product module over MAX_MODULE_LINES lines and every function over
    MAX_FUNCTION_LINES (decorators aside), as ``path: what``."""
    found = []
    for package in FIRST_PARTY:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            name = path.relative_to(root).as_posix()
            source = path.read_text(encoding="utf-8")
            if (lines := len(source.splitlines())) > MAX_MODULE_LINES:
                found.append(f"{name}: {lines} lines")
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        found.append(f"{name}: {node.name} is {length} lines")
    return found


def test_no_module_or_function_is_too_long_to_read() -> None:
    assert oversized(REPO) == []


def test_a_long_module_and_a_long_function_are_caught(tmp_path: Path) -> None:
    package = tmp_path / "daemon"
    package.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (package / "long.py").write_text("def f() -> None:\n" + body, encoding="utf-8")
    (package / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1), encoding="utf-8")
    (package / "migrations").mkdir()
    (package / "migrations" / "old.py").write_text("x = 1\n" * 999, encoding="utf-8")
    assert oversized(tmp_path) == [
        f"daemon/big.py: {MAX_MODULE_LINES + 1} lines",
        f"daemon/long.py: f is {MAX_FUNCTION_LINES + 1} lines",
    ]


def store_imports_from_outside(root: Path) -> list[str]:
    """Every import of a ``daemon.store`` module by a module outside it, as ``module ->
    imported``."""
    return [
        f"{module_name(root, path)} -> {name}"
        for package in FIRST_PARTY
        for path in sorted((root / package).rglob("*.py"))
        if not within(module_name(root, path), {"daemon.store"})
        for name in sorted(imports_of(path))
        if within(name, {"daemon.store"})
    ]


def test_only_the_store_imports_its_tables() -> None:
    found = store_imports_from_outside(REPO)
    assert [f for f in found if f.endswith(" -> daemon.store.tables")] == []


def test_outside_the_store_only_its_face_is_imported() -> None:
    found = store_imports_from_outside(REPO)
    assert [f for f in found if f.split(" -> ")[1] not in STORE_DOORS] == []


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ("from daemon.store.tables import MarkTable\n", ["daemon.leak -> daemon.store.tables"]),
        (
            "def later() -> None:\n    import daemon.store.marks\n",
            ["daemon.leak -> daemon.store.marks"],
        ),
        ("from daemon.store import Store\nfrom daemon.store.migrate import upgrade\n", []),
    ],
)
def test_a_reach_into_the_store_is_caught(tmp_path: Path, source: str, caught: list[str]) -> None:
    for package in FIRST_PARTY:
        (tmp_path / package).mkdir()
    (tmp_path / "daemon" / "leak.py").write_text(source)
    (tmp_path / "daemon" / "store").mkdir()
    (tmp_path / "daemon" / "store" / "marks.py").write_text("from daemon.store.tables import T\n")
    found = store_imports_from_outside(tmp_path)
    assert [f for f in found if f.split(" -> ")[1] not in STORE_DOORS] == caught


# -- the tests themselves -----------------------------------------------------------------

# Calls that check: pytest's, and helpers that assert on their caller's behalf (listed by
# name, each one read and known to assert).
ASSERTING_HELPERS = frozenset(
    {
        "raises",  # pytest.raises
        "fail",  # pytest.fail
        "crash_repeatedly",  # tests/reliability/test_crash_recovery.py
        "fuzz",  # tests/reliability/test_ingress_fuzz.py
        "race_appenders_and_consolidations",  # tests/reliability/test_file_layers.py
        "kill_during_merges",  # tests/reliability/test_file_layers.py
        "recall_by_text",  # tests/integration/test_client_in_process.py
        "bounded_context",  # tests/integration/test_client_in_process.py
    }
)


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of ``function``'s own body, not those of functions defined inside it."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        found.append(node)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            pending.extend(ast.iter_child_nodes(node))
    return found


def _checks(node: ast.AST) -> bool:
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.Call):
        called = node.func
        name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", None)
        return name in ASSERTING_HELPERS
    return False


def _early_returns(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    """Lines of ``return`` statements with no check before them in their block: a test
    that ends there reports a pass for nothing (``pytest.skip`` says why instead)."""
    lines = []
    for node in [function, *_own_nodes(function)]:
        if node is not function and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for index, statement in enumerate(block):
                if isinstance(statement, ast.Return) and not any(
                    _checks(inner) for before in block[:index] for inner in ast.walk(before)
                ):
                    lines.append(statement.lineno)
    return lines


def collected_tests(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    found = []
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        found.extend(
            member
            for member in members
            if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef)
            and member.name.startswith("test")
        )
    return found


def weak_tests(source: str, name: str) -> list[str]:
    """Every test function in ``source`` that checks nothing, or returns before checking."""
    found = []
    for function in collected_tests(ast.parse(source)):
        if not any(_checks(node) for node in _own_nodes(function)):
            found.append(f"{name}::{function.name}: no assert, pytest.raises or pytest.fail")
        found.extend(
            f"{name}:{line}: {function.name} returns before checking (use pytest.skip)"
            for line in _early_returns(function)
        )
    return found


def test_every_test_checks_something_and_never_returns_instead_of_skipping() -> None:
    found = [
        problem
        for path in sorted((REPO / "tests").rglob("test_*.py"))
        for problem in weak_tests(path.read_text(encoding="utf-8"), path.name)
    ]
    assert found == []


@pytest.mark.parametrize(
    ("source", "problems"),
    [
        ("def test_a():\n    f()\n", 1),
        ("async def test_a():\n    def inner():\n        assert x\n    inner()\n", 1),
        ("def test_a():\n    if not URL:\n        return\n    assert f()\n", 1),
        ("class TestA:\n    def test_b(self):\n        pass\n", 1),
        ("def test_a():\n    assert f()\n", 0),
        ("def test_a():\n    with pytest.raises(E):\n        f()\n", 0),
        ("def test_a():\n    for x in xs:\n        assert x\n        return\n    fail()\n", 0),
        ("def helper():\n    return\n", 0),
        ("def test_a():\n    return\n    assert f()\n", 1),
        ("def test_a():\n    def inner():\n        return 1\n    assert inner()\n", 0),
    ],
)
def test_a_weak_test_is_caught(source: str, problems: int) -> None:
    assert len(weak_tests(source, "t.py")) == problems
