"""Where people wait: the CLI and the MCP server as whole processes, and the daemon's CPU
per ``GET /v1/health`` (what ``cambium status`` and Loom ask).

- each command is run start to exit (``cambium mcp``: from spawning to the answer to an
  ``initialize`` line), beside ``python -c pass`` measured in the same run, interleaved (a
  round of each, repeated), so the machine's load falls on all of them alike; the median
  wall time and the median CPU time of the child (``RUSAGE_CHILDREN``);
- the daemon's CPU per health request: its ``utime + stime`` from ``/proc/<pid>/stat`` over
  many requests on one connection.

    .venv/bin/python -m bench.cli
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness import process_cpu, scratch
from bench.report import Figure, Part, at_most, main_for
from daemon.client import Client
from daemon.testing import CAMBIUM, DaemonHome

ROUNDS = 9
HEALTH_REQUESTS = 2000
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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _command(argv: list[str], env: dict[str, str]) -> Callable[[], None]:
    def run() -> None:
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    return run


def _mcp_initialise(config: Path, env: dict[str, str]) -> Callable[[], None]:
    def run() -> None:
        server = subprocess.Popen(
            [CAMBIUM, "mcp", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(_INITIALIZE).encode() + b"\n")
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
        assert answer.get("id") == 1 and "result" in answer, answer
        server.stdin.close()
        server.wait(10)

    return run


def _timed(run: Callable[[], None]) -> tuple[float, float]:
    """Wall and CPU seconds of one run (its CPU is the children's, counted at their exit)."""
    cpu, started = _children_cpu(), time.perf_counter()
    run()
    return time.perf_counter() - started, _children_cpu() - cpu


def _health_cpu_ms(home: DaemonHome) -> float:
    assert home.process is not None
    pid = home.process.pid
    with Client(home.socket) as client:
        client.health()
        before = process_cpu(pid)
        for _ in range(HEALTH_REQUESTS):
            client.health()
        return (process_cpu(pid) - before) / HEALTH_REQUESTS * 1000


def run() -> Part:
    with scratch() as root, DaemonHome(root) as home:
        env, config = home.env(), str(home.config)
        commands: dict[str, Callable[[], None]] = {
            "python -c pass": _command([sys.executable, "-c", "pass"], env),
            "cambium --help": _command([CAMBIUM, "--help"], env),
            "cambium status": _command([CAMBIUM, "status", "--config", config], env),
            "cambium memory recall": _command(
                [CAMBIUM, "memory", "recall", "lentil soup", "--config", config], env
            ),
            "cambium mcp initialise": _mcp_initialise(home.config, env),
        }
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(ROUNDS):
            for name, command in commands.items():
                seconds, cpu_seconds = _timed(command)
                walls[name].append(seconds)
                cpus[name].append(cpu_seconds)
        health = _health_cpu_ms(home)
    wall = {name: statistics.median(values) * 1000 for name, values in walls.items()}
    cpu = {name: statistics.median(values) * 1000 for name, values in cpus.items()}
    base = wall["python -c pass"]
    goals = {
        "cambium --help": 250,
        "cambium status": 350,
        "cambium memory recall": 400,
        "cambium mcp initialise": 1000,
    }
    figures = [Figure("python -c pass", base, "ms")]
    for name, ceiling in goals.items():
        figures.append(at_most(name, wall[name], ceiling, "ms"))
    ratio = wall["cambium --help"] / base
    figures.append(at_most("cambium --help / python -c pass", ratio, 5, "x"))
    figures += [Figure(f"{name} CPU", value, "ms") for name, value in cpu.items()]
    figures.append(at_most("daemon CPU per GET /v1/health", health, 0.3, "ms"))
    load = Path("/proc/loadavg").read_text(encoding="ascii").split()[:3]
    return Part("cli", figures, {"rounds": ROUNDS, "loadavg": load, "wall_ms": wall})


if __name__ == "__main__":
    main_for(run)
