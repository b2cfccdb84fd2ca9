"""Each line read from stdin checked before the MCP SDK sees it, so that every malformed
message gets an answer instead of silence: a line that is too long, not UTF-8, not JSON, a
batch, not a JSON-RPC message, or text holding a lone surrogate (valid JSON, ``"\\ud800"``,
but not Unicode) is answered with a JSON-RPC error; a lone surrogate in a tool's arguments
is answered as a tool error naming the argument, as any other bad argument is."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

# Longer lines are refused (and read to their end in pieces, never held whole): a tool's
# arguments are at most a few texts of 16 KiB; a megabyte is far beyond any honest call.
MAX_LINE_BYTES = 1 << 20
_PIECE_BYTES = 1 << 16


@dataclass(frozen=True)
class Refusal:
    """The answer to a line the SDK is not given."""

    message: types.JSONRPCError | types.JSONRPCResponse


class TooLong:
    """A line over :data:`MAX_LINE_BYTES`, read to its end and dropped."""


TOO_LONG = TooLong()


def read_line(stream: BinaryIO) -> bytes | TooLong | None:
    """The next line of ``stream`` without its newline (``None`` at the end)."""
    line = stream.readline(MAX_LINE_BYTES + 2)  # room for "\r\n"
    if not line:
        return None
    if len(line) == MAX_LINE_BYTES + 2 and not line.endswith(b"\n"):
        while (piece := stream.readline(_PIECE_BYTES)) and not piece.endswith(b"\n"):
            pass
        return TOO_LONG
    content = line.rstrip(b"\r\n")
    return TOO_LONG if len(content) > MAX_LINE_BYTES else content


def check(line: bytes | TooLong) -> str | Refusal | None:
    """``line`` as text for the SDK, the answer to give instead, or ``None`` to skip it
    (a blank line)."""
    if isinstance(line, TooLong):
        return _error(None, types.INVALID_REQUEST, f"a message over {MAX_LINE_BYTES} bytes")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _error(None, types.PARSE_ERROR, f"not UTF-8 (byte {exc.start}: {exc.reason})")
    if not text.strip():
        return None
    try:
        message = json.loads(text)
    except json.JSONDecodeError as exc:
        return _error(None, types.PARSE_ERROR, f"not JSON ({exc.msg} at column {exc.colno})")
    if isinstance(message, list):
        return _error(None, types.INVALID_REQUEST, "batches are not supported: one message a line")
    if not isinstance(message, dict):
        return _error(None, types.INVALID_REQUEST, "a message must be a JSON object")
    return _check_message(message, text)


def _check_message(message: dict[str, Any], text: str) -> str | Refusal:
    request_id = _id_of(message)
    if request_id is not None and _is_tool_call(message):
        arguments = message["params"].get("arguments")
        if (where := next(lone_surrogates(arguments, ""), None)) is not None:
            return _tool_error(request_id, where)
    if (where := next(lone_surrogates(message, ""), None)) is not None:
        return _error(request_id, types.INVALID_REQUEST, f"{where}: {_NOT_UNICODE}")
    if "params" in message and not isinstance(message["params"], dict | None):
        return _error(request_id, types.INVALID_PARAMS, "params must be an object")
    try:
        types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        return _error(request_id, types.INVALID_REQUEST, "not a JSON-RPC 2.0 message")
    return text


_NOT_UNICODE = "holds a lone surrogate (like \\ud800), which is not Unicode text"


def lone_surrogates(value: Any, path: str) -> Iterator[str]:
    """Where in ``value`` (parsed JSON) a string holds a lone surrogate, as dotted paths
    (``layers.1``); a surrogate in an object's key is reported as that object's keys."""
    if isinstance(value, str):
        if any("\ud800" <= char <= "\udfff" for char in value):
            yield path or "the value"
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from lone_surrogates(item, f"{path}.{index}" if path else str(index))
    elif isinstance(value, dict):
        if any(next(lone_surrogates(key, "k"), None) for key in value):
            yield f"{path}: its keys" if path else "argument names"
        for key, item in value.items():
            if next(lone_surrogates(key, "k"), None) is None:
                yield from lone_surrogates(item, f"{path}.{key}" if path else key)


def _is_tool_call(message: dict[str, Any]) -> bool:
    params = message.get("params")
    return message.get("method") == "tools/call" and isinstance(params, dict)


def _id_of(message: dict[str, Any]) -> str | int | None:
    """The request's id when it is a usable one (so the answer can name it), else ``None``."""
    value = message.get("id")
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    if isinstance(value, str) and next(lone_surrogates(value, ""), None) is not None:
        return None
    return value


def _error(request_id: str | int | None, code: int, problem: str) -> Refusal:
    kind = {types.PARSE_ERROR: "Parse error", types.INVALID_PARAMS: "Invalid params"}
    message = f"{kind.get(code, 'Invalid Request')}: {problem}"
    error = types.ErrorData(code=code, message=message)
    return Refusal(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _tool_error(request_id: str | int, where: str) -> Refusal:
    result = types.CallToolResult(
        content=[types.TextContent(text=f"bad arguments: {where}: {_NOT_UNICODE}")],
        is_error=True,
    )
    return Refusal(
        types.JSONRPCResponse(
            jsonrpc="2.0",
            id=request_id,
            result=result.model_dump(by_alias=True, mode="json", exclude_none=True),
        )
    )


class Answers(Protocol):
    """Where the answers to refused lines go: the SDK's stream to stdout."""

    async def send(self, item: SessionMessage, /) -> None: ...


class CheckedLines:
    r"""stdin as the SDK's stdio transport reads it (an async iterator of text lines), with
    every line :func:`check`\ ed first and refused ones answered on ``answers``."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self._answers: Answers | None = None
        self._ready = anyio.Event()

    def answer_on(self, answers: Answers) -> None:
        self._answers = answers
        self._ready.set()

    def __aiter__(self) -> CheckedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            # Abandoned on cancel: a thread blocked reading stdin must not hold up shutdown.
            line = await anyio.to_thread.run_sync(read_line, self.stream, abandon_on_cancel=True)
            if line is None:
                raise StopAsyncIteration
            verdict = check(line)
            if isinstance(verdict, str):
                return verdict
            if verdict is not None:
                await self._ready.wait()
                assert self._answers is not None
                await self._answers.send(SessionMessage(verdict.message))
