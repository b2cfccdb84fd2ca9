"""A scripted OpenAI-compatible chat-completions server on a loopback port, for tests.

It speaks real HTTP (the standard library's threading server), so the extractor's real
client code path runs: requests, headers, status codes, Retry-After, timeouts. Each request
takes the next scripted :class:`Reply`; every request body is recorded, so a test can check
exactly what left the "machine".

Beyond the script: ``refuses`` emulates a server's dialect (a ``response_format`` type it
refuses, and the reply it refuses it with, as real servers do); ``responder`` answers every
request the script leaves unanswered from its body (a fake model that reads the lines).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str | None = None  # the assistant's text, wrapped in a chat completion
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None  # a raw body instead of a completion
    hang: bool = False  # never answer (until the server closes)
    # Send ``body`` this many times over, with no content-length (the connection's close
    # ends it): a huge answer that the server never holds whole.
    repeat: int = 1
    finish_reason: str = "stop"  # "length": the server's token limit cut the answer off
    tokens: int | None = None  # the usage's total_tokens, if the server counts


# What llama-cpp-python's server (2026) answers a ``json_schema`` response_format with.
LLAMA_CPP_PYTHON_REFUSAL = Reply(
    status=500,
    body=json.dumps(
        {
            "error": {
                "message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', "
                "'type'), 'msg': \"Input should be 'text' or 'json_object'\", "
                "'input': 'json_schema'}]",
                "type": "internal_server_error",
            }
        }
    ),
)


def facts(*items: tuple[str, str, int, int]) -> str:
    """An answer in the requested shape: (subject, observation, first line, last line)."""
    return json.dumps(
        {
            "facts": [
                {"subject": s, "observation": o, "line_range": [a, b], "affinity": []}
                for s, o, a, b in items
            ]
        }
    )


@dataclass
class ChatServer:
    url: str
    script: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    refuses: dict[str, Reply] = field(default_factory=dict)  # response_format type -> reply
    responder: Callable[[dict[str, Any]], Reply] | None = None
    models: list[str] = field(default_factory=list)  # listed at GET /v1/models, /api/tags

    def say(self, *replies: Reply | str) -> None:
        self.script.extend(Reply(r) if isinstance(r, str) else r for r in replies)

    def user_texts(self) -> list[str]:
        """The user messages of every request, in order."""
        return [
            m["content"] for body in self.requests for m in body["messages"] if m["role"] == "user"
        ]


@contextmanager
def chat_server() -> Iterator[ChatServer]:
    release = threading.Event()
    server_state: ChatServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            names = server_state.models
            if self.path == "/v1/models":
                listing: dict[str, Any] = {"object": "list", "data": [{"id": n} for n in names]}
            elif self.path == "/api/tags":  # Ollama's own
                listing = {"models": [{"name": n, "model": n} for n in names]}
            else:
                self._send(404, {}, '{"error": "not found"}')
                return
            self._send(200, {}, json.dumps(listing))

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length))
            server_state.requests.append(body)
            server_state.headers.append(dict(self.headers))
            if self.path != "/v1/chat/completions":
                self._send(404, {}, '{"error": "not found"}')
                return
            reply = self._reply(body)
            if reply.hang:
                release.wait(30)
                return
            if reply.repeat > 1:
                self._stream(reply.status, (reply.body or "").encode(), reply.repeat)
                return
            if reply.body is not None or reply.content is None:
                self._send(reply.status, reply.headers, reply.body or "{}")
                return
            completion: dict[str, Any] = {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.content},
                        "finish_reason": reply.finish_reason,
                    }
                ],
            }
            if reply.tokens is not None:
                completion["usage"] = {"total_tokens": reply.tokens}
            self._send(reply.status, reply.headers, json.dumps(completion))

        def _reply(self, body: dict[str, Any]) -> Reply:
            wanted = (body.get("response_format") or {}).get("type")
            if wanted in server_state.refuses:
                return server_state.refuses[wanted]
            if server_state.script:
                return server_state.script.pop(0)
            if server_state.responder is not None:
                return server_state.responder(body)
            return Reply(status=500)

        def _stream(self, status: int, piece: bytes, times: int) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.end_headers()
            try:
                for _ in range(times):
                    self.wfile.write(piece)
            except OSError:  # the client gave up reading
                pass

        def _send(self, status: int, headers: dict[str, str], text: str) -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server_state = ChatServer(url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", script=[])
    # A short poll: shutdown() waits for the loop to look, 0.5 s a test by default.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server_state
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()
