"""``cambium mcp`` on bad protocol input: raw bytes written to the real server process's
stdin, each answered on stdout with a JSON-RPC error (or, for a lone surrogate in a tool's
argument, a tool error naming the argument) within a bound; the server keeps serving."""

from __future__ import annotations

import json
import os
import select
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from daemon.testing import CAMBIUM, DaemonHome

ANSWER_SECONDS = 10.0  # the bound: a hang shows as no line within it
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


class Server:
    """``cambium mcp`` as a subprocess, spoken to in raw lines."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.pending = b""

    def send(self, raw: bytes) -> None:
        assert self.process.stdin is not None

        # A thread, so a server that stops reading cannot block the test.
        def write() -> None:
            assert self.process.stdin is not None
            try:
                self.process.stdin.write(raw + b"\n")
                self.process.stdin.flush()
            except BrokenPipeError:
                pass

        threading.Thread(target=write, daemon=True).start()

    def answer(self) -> dict[str, Any]:
        """The next line the server writes, as JSON; fails after ANSWER_SECONDS."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + ANSWER_SECONDS
        fd = self.process.stdout.fileno()
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            if not ready:
                pytest.fail(f"no answer within {ANSWER_SECONDS:g} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                pytest.fail("the server closed stdout")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(json.dumps(message).encode())
        return self.answer()


@contextmanager
def mcp_server(home: DaemonHome) -> Iterator[Server]:
    with (home.root / "mcp.stderr").open("ab") as errors:
        process = subprocess.Popen(
            [CAMBIUM, "mcp", "--config", str(home.config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=home.env(),
        )
    server = Server(process)
    try:
        hello = server.request(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw-bytes", "version": "1"},
                },
            }
        )
        assert "result" in hello, hello
        server.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        yield server
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    # A server per case, so no case's answer can be taken for another's; and no daemon
    # runs: every case here must be answered without one.
    with mcp_server(DaemonHome(tmp_path)) as server:
        yield server


def still_serving(server: Server) -> None:
    listed = server.request({"jsonrpc": "2.0", "id": "after", "method": "tools/list"})
    assert listed["id"] == "after" and "recall" in {t["name"] for t in listed["result"]["tools"]}


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        pytest.param(b"this is not json", PARSE_ERROR, id="not-json"),
        pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/li', PARSE_ERROR, id="cut"),
        pytest.param(b"\xff\xfe{not utf-8}\x80", PARSE_ERROR, id="invalid-utf8"),
        pytest.param(
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": "all"}',
            INVALID_PARAMS,
            id="params-a-string",
        ),
        pytest.param(
            b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]',
            INVALID_REQUEST,
            id="batch",
        ),
        pytest.param(b"42", INVALID_REQUEST, id="a-number"),
        pytest.param(b'{"id": 1, "method": "tools/list"}', INVALID_REQUEST, id="no-jsonrpc"),
        pytest.param(
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}',
            INVALID_PARAMS,
            id="params-a-list",
        ),
        pytest.param(
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list\\ud800"}',
            INVALID_REQUEST,
            id="surrogate-in-method",
        ),
        pytest.param(
            b'{"jsonrpc": "2.0", "id": 1, "method": "' + b"x" * (8 << 20) + b'"}',
            INVALID_REQUEST,
            id="an-8-MB-line",
        ),
    ],
)
def test_bad_protocol_input_gets_a_json_rpc_error(server: Server, raw: bytes, code: int) -> None:
    server.send(raw)
    answer = server.answer()
    assert answer["jsonrpc"] == "2.0" and answer["error"]["code"] == code, answer
    assert answer["error"]["message"], "the error says what was wrong"
    still_serving(server)


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"about": "lentil \ud800 soup"}, "about"),
        ({"about": "x", "layers": ["marks", "\udfff"]}, "layers.1"),
        ({"about": "x", "\ud800": "y"}, "argument names"),
    ],
)
def test_a_lone_surrogate_in_an_argument_is_a_tool_error_naming_it(
    server: Server, arguments: dict[str, Any], named: str
) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "recall", "arguments": arguments},
    }
    # json.dumps escapes the surrogate as \ud800: the line is valid JSON, its text is not.
    answer = server.request(call)
    assert answer["id"] == 7 and answer["result"]["isError"], answer
    [text] = [block["text"] for block in answer["result"]["content"]]
    assert named in text and "surrogate" in text, text
    still_serving(server)
