"""Where people and agents wait: the CLI, the MCP server and Loom's door, as whole processes
and pages, beside ``python -c pass`` measured in the same run; and the daemon's CPU per
``GET /v1/health`` (what ``cambium status``, Loom and supervisors ask).

- each command is run start to exit (``cambium mcp``: from spawning to the answer to an
  ``initialize`` line, and to the answer to the ``tools/list`` after it), interleaved (a
  round of each, repeated), so the machine's load falls on all of them alike; the median
  wall time and the median CPU time of the child (``RUSAGE_CHILDREN``). ``recall`` is
  timed with the daemon up (it answers) and, informally, down (the CLI reads the store);
- a Loom page through the door ``cambium loom`` opens (signed in with its one-time link,
  on one kept-alive connection) against the same page asked of the daemon's socket
  directly, alternately, and the door's own CPU per page (from ``/proc``);
- the daemon's CPU per health request: its ``utime + stime`` from ``/proc/<pid>/stat``
  over many requests on one connection.

The load average is reported before and after: on a shared machine, compare the ratios.

    .venv/bin/python -m bench.cli
"""

from __future__ import annotations

import http.client
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from bench.harness import process_cpu, scratch, whole_process
from bench.report import Figure, Part, at_most, main_for
from daemon.client import Client
from daemon.client._wire import Wire
from daemon.testing import CAMBIUM, DaemonHome

ROUNDS = 9
HEALTH_REQUESTS = 2000
PAGES = 40  # per round, through the door and direct, alternately
LOOM_PAGE = "/loom/"
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
GOALS = {
    "cambium --help": 250.0,
    "cambium status": 350.0,
    "cambium memory recall": 400.0,
    "cambium mcp initialise": 1000.0,
}


def _command(argv: list[str], env: dict[str, str]) -> Callable[[], None]:
    def run() -> None:
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    return run


def _mcp(
    config: Path, env: dict[str, str], messages: list[dict[str, object]]
) -> Callable[[], None]:
    """Spawn ``cambium mcp``, send ``messages`` one after the other, each when the answer to
    the one before has come, and end when the last is answered."""

    def run() -> None:
        server = subprocess.Popen(
            [CAMBIUM, "mcp", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        assert server.stdin is not None and server.stdout is not None
        for message in messages:
            server.stdin.write(json.dumps(message).encode() + b"\n")
            server.stdin.flush()
            answer = json.loads(server.stdout.readline())
            assert answer.get("id") == message["id"] and "result" in answer, answer
        server.stdin.close()
        server.wait(10)

    return run


def _health_cpu_ms(home: DaemonHome) -> float:
    assert home.process is not None
    wire = Wire(home.socket, None)
    try:
        wire.request("GET", "/v1/health", timeout=10).json()
        before = process_cpu(home.process.pid)
        for _ in range(HEALTH_REQUESTS):
            wire.request("GET", "/v1/health", timeout=10).json()
        return (process_cpu(home.process.pid) - before) / HEALTH_REQUESTS * 1000
    finally:
        wire.close()


def _with_memory(home: DaemonHome) -> None:
    """Something to recall: marks, and lines of today's log."""
    with Client(home.socket, source_id="bench") as client:
        for n in range(20):
            client.observe(f"user.food.dish{n}", f"likes lentil soup with dish {n}", wait=10)
            client.note(f"lentil soup for lunch, bowl {n}", wait=10)


def _offline(root: Path) -> DaemonHome:
    """A memory whose daemon is not running: the CLI reads its store itself."""
    home = DaemonHome(root)
    assert home.cli("db", "upgrade").returncode == 0
    (root / "memory" / "daily" / "2026-11-30.md").write_text("lentil soup for lunch\n" * 50)
    return home


def _commands(home: DaemonHome, offline: DaemonHome) -> dict[str, Callable[[], None]]:
    env, config = home.env(), str(home.config)
    recall = [CAMBIUM, "memory", "recall", "lentil soup"]
    return {
        "python -c pass": _command([sys.executable, "-c", "pass"], env),
        "cambium --help": _command([CAMBIUM, "--help"], env),
        "cambium status": _command([CAMBIUM, "status", "--config", config], env),
        "cambium memory recall": _command([*recall, "--config", config], env),
        "cambium memory recall (daemon down)": _command(
            [*recall, "--horizon", "all", "--config", str(offline.config)], offline.env()
        ),
        "cambium mcp initialise": _mcp(home.config, env, [_INITIALIZE]),
        "cambium mcp initialise, tools/list": _mcp(home.config, env, [_INITIALIZE, _TOOLS]),
    }


class Door:
    """``cambium loom`` running, signed in: pages on one kept-alive connection."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        parts = urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
        self.connection.request("GET", f"{parts.path}?{parts.query}")
        answer = self.connection.getresponse()
        answer.read()
        assert answer.status == 303, answer.status
        self.cookie = (answer.getheader("set-cookie") or "").split(";", 1)[0]

    def page(self, path: str) -> bytes:
        self.connection.request("GET", path, headers={"Cookie": self.cookie})
        answer = self.connection.getresponse()
        body = answer.read()
        assert answer.status == 200, answer.status
        return body


@contextmanager
def _door(home: DaemonHome) -> Iterator[Door]:
    process = subprocess.Popen(
        [CAMBIUM, "loom", "--print-url", "--config", str(home.config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=home.env(),
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().removeprefix("Loom:").strip()
        yield Door(process, url)
    finally:
        process.terminate()
        process.wait(10)


def _loom(home: DaemonHome) -> dict[str, float]:
    """Median wall per page through the door and direct, and the door's CPU per page."""
    direct = Wire(home.socket, None)
    through: list[float] = []
    straight: list[float] = []
    with _door(home) as door:
        door.page(LOOM_PAGE)
        cpu = process_cpu(door.process.pid)
        for _ in range(ROUNDS * PAGES):
            started = time.perf_counter()
            door.page(LOOM_PAGE)
            through.append(time.perf_counter() - started)
            started = time.perf_counter()
            answer = direct.request("GET", LOOM_PAGE, timeout=30)
            straight.append(time.perf_counter() - started)
            assert answer.status == 200, answer.status
        door_cpu = (process_cpu(door.process.pid) - cpu) / len(through)
    direct.close()
    return {
        "door": statistics.median(through) * 1000,
        "direct": statistics.median(straight) * 1000,
        "door CPU": door_cpu * 1000,
    }


def _load() -> list[str]:
    return Path("/proc/loadavg").read_text(encoding="ascii").split()[:3]


def run() -> Part:
    load_before = _load()
    with scratch() as root, DaemonHome(root / "up") as home:
        _with_memory(home)
        commands = _commands(home, _offline(root / "down"))
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(ROUNDS):
            for name, command in commands.items():
                seconds, cpu_seconds = whole_process(command)
                walls[name].append(seconds)
                cpus[name].append(cpu_seconds)
        loom = _loom(home)
        health = _health_cpu_ms(home)
    wall = {name: statistics.median(values) * 1000 for name, values in walls.items()}
    cpu = {name: statistics.median(values) * 1000 for name, values in cpus.items()}
    return Part("cli", _figures(wall, cpu, loom, health), _details(wall, load_before))


def _figures(
    wall: dict[str, float], cpu: dict[str, float], loom: dict[str, float], health: float
) -> list[Figure]:
    base = wall["python -c pass"]
    figures = [Figure("python -c pass", base, "ms")]
    figures += [
        at_most(name, value, GOALS[name], "ms") if name in GOALS else Figure(name, value, "ms")
        for name, value in wall.items()
        if name != "python -c pass"
    ]
    figures.append(
        at_most("cambium --help / python -c pass", wall["cambium --help"] / base, 5, "x")
    )
    figures += [Figure(f"{name} CPU", value, "ms") for name, value in cpu.items()]
    figures += [
        Figure("Loom page through the door", loom["door"], "ms"),
        Figure("Loom page direct (the daemon's socket)", loom["direct"], "ms"),
        at_most("Loom page: door / direct", loom["door"] / loom["direct"], 1.5, "x"),
        Figure("Loom door CPU per page", loom["door CPU"], "ms"),
        at_most("daemon CPU per GET /v1/health", health, 0.3, "ms"),
    ]
    return figures


def _details(wall: dict[str, float], load_before: list[str]) -> dict[str, object]:
    return {
        "rounds": ROUNDS,
        "loadavg_before": load_before,
        "loadavg_after": _load(),
        "wall_ms": wall,
    }


if __name__ == "__main__":
    main_for(run)
