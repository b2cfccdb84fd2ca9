"""Each line read from stdin checked before the server acts on it, so that every malformed
message gets an answer instead of silence: a line that is too long, not UTF-8, not JSON, a
batch, not a JSON-RPC 2.0 message, or text holding a lone surrogate (valid JSON,
``"\\ud800"``, but not Unicode) is answered with a JSON-RPC error; a lone surrogate in a
tool's arguments is answered as a tool error naming the argument, as any other bad argument
is. The messages are plain dicts, as JSON has them (no SDK, no pydantic: ``cambium mcp``
answers ``initialize`` in about the time Python takes to start)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

# Longer lines are refused (and read to their end in pieces, never held whole): a tool's
# arguments are at most a few texts of 16 KiB; a megabyte is far beyond any honest call.
MAX_LINE_BYTES = 1 << 20
_PIECE_BYTES = 1 << 16

# JSON-RPC 2.0's error codes.
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
_KINDS = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
}

RequestId = str | int


@dataclass(frozen=True)
class Refusal:
    """The answer to a line the server does not act on."""

    message: dict[str, Any]


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


def check(line: bytes | TooLong) -> dict[str, Any] | Refusal | None:
    """``line`` as a JSON-RPC message, the answer to give instead, or ``None`` to skip it
    (a blank line)."""
    if isinstance(line, TooLong):
        return error_answer(None, INVALID_REQUEST, f"a message over {MAX_LINE_BYTES} bytes")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return error_answer(None, PARSE_ERROR, f"not UTF-8 (byte {exc.start}: {exc.reason})")
    if not text.strip():
        return None
    try:
        message = json.loads(text)
    except json.JSONDecodeError as exc:
        return error_answer(None, PARSE_ERROR, f"not JSON ({exc.msg} at column {exc.colno})")
    if isinstance(message, list):
        return error_answer(None, INVALID_REQUEST, "batches are not supported: one message a line")
    if not isinstance(message, dict):
        return error_answer(None, INVALID_REQUEST, "a message must be a JSON object")
    return _check_message(message)


def _check_message(message: dict[str, Any]) -> dict[str, Any] | Refusal:
    request_id = id_of(message)
    if request_id is not None and _is_tool_call(message):
        arguments = message["params"].get("arguments")
        if (where := next(lone_surrogates(arguments, ""), None)) is not None:
            return Refusal(
                answer(
                    request_id, tool_result(f"bad arguments: {where}: {_NOT_UNICODE}", error=True)
                )
            )
    if (where := next(lone_surrogates(message, ""), None)) is not None:
        return error_answer(request_id, INVALID_REQUEST, f"{where}: {_NOT_UNICODE}")
    if "params" in message and not isinstance(message["params"], dict | None):
        return error_answer(request_id, INVALID_PARAMS, "params must be an object")
    if not _is_json_rpc(message):
        return error_answer(request_id, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
    return message


def _is_json_rpc(message: dict[str, Any]) -> bool:
    """A request (``method`` and an ``id``), a notification (``method``, no ``id``) or a
    response (an ``id`` and ``result`` or ``error``), as JSON-RPC 2.0 has them."""
    if message.get("jsonrpc") != "2.0":
        return False
    if "method" in message:
        return isinstance(message["method"], str) and (
            "id" not in message or id_of(message) is not None
        )
    return id_of(message) is not None and ("result" in message) != ("error" in message)


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


def id_of(message: dict[str, Any]) -> RequestId | None:
    """The request's id when it is a usable one (so the answer can name it), else ``None``."""
    value = message.get("id")
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    if isinstance(value, str) and next(lone_surrogates(value, ""), None) is not None:
        return None
    return value


def answer(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_answer(request_id: RequestId | None, code: int, problem: str) -> Refusal:
    error = {"code": code, "message": f"{_KINDS[code]}: {problem}"}
    return Refusal({"jsonrpc": "2.0", "id": request_id, "error": error})


def tool_result(text: str, *, error: bool = False) -> dict[str, Any]:
    """A ``tools/call`` result: one text block; ``error``: a failure the model can act on."""
    return {"content": [{"type": "text", "text": text}], "isError": error}
