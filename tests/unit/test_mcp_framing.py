"""The MCP line check in process: what each malformed line is answered with, a long line
read to its end without being held, and the paths a lone surrogate is reported at."""

from __future__ import annotations

import io
import json

import pytest

from daemon.mcp.framing import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_LINE_BYTES,
    PARSE_ERROR,
    Refusal,
    TooLong,
    check,
    lone_surrogates,
    read_line,
)


def test_a_line_over_the_cap_is_dropped_whole_and_the_next_one_read() -> None:
    stream = io.BytesIO(b"x" * (3 * MAX_LINE_BYTES) + b"\n" + b'{"next": 1}\n')
    assert isinstance(read_line(stream), TooLong)
    assert read_line(stream) == b'{"next": 1}'
    assert read_line(stream) is None


def test_a_line_at_the_cap_is_kept() -> None:
    line = b"y" * MAX_LINE_BYTES
    assert read_line(io.BytesIO(line + b"\r\n")) == line


def test_a_good_message_is_taken_as_it_is_and_a_blank_line_is_skipped() -> None:
    text = '{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}'
    assert check(text.encode()) == json.loads(text)
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert check(json.dumps(notification).encode()) == notification
    response = {"jsonrpc": "2.0", "id": "s1", "result": {}}
    assert check(json.dumps(response).encode()) == response
    assert check(b"   ") is None


@pytest.mark.parametrize(
    ("line", "code", "request_id"),
    [
        (b"{", PARSE_ERROR, None),
        (b'"\xc3\x28"', PARSE_ERROR, None),
        (b"[]", INVALID_REQUEST, None),
        (b"null", INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": 5, "method": "x", "params": "s"}', INVALID_PARAMS, 5),
        (b'{"jsonrpc": "1.0", "id": "a", "method": "x"}', INVALID_REQUEST, "a"),
        (b'{"jsonrpc": "2.0", "id": true, "method": 7}', INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "x"}', INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": null, "method": "x"}', INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": 4}', INVALID_REQUEST, 4),
        (b'{"jsonrpc": "2.0", "id": 4, "result": {}, "error": {}}', INVALID_REQUEST, 4),
    ],
)
def test_each_malformed_line_is_a_json_rpc_error(
    line: bytes, code: int, request_id: str | int | None
) -> None:
    refusal = check(line)
    assert isinstance(refusal, Refusal)
    assert refusal.message["error"]["code"] == code and refusal.message["id"] == request_id


def test_a_surrogate_in_a_tool_call_is_a_tool_error_naming_the_argument() -> None:
    call = {"name": "observe", "arguments": {"subject": "user", "evidence": {"note": "\udc00"}}}
    line = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": call})
    refusal = check(line.encode())
    assert isinstance(refusal, Refusal)
    assert refusal.message["id"] == 9 and refusal.message["result"]["isError"] is True
    assert "bad arguments: evidence.note: holds a lone surrogate" in json.dumps(
        refusal.message["result"]
    )


def test_lone_surrogates_are_found_at_their_paths() -> None:
    value = {"a": ["ok", "\ud800"], "b": {"c": "\udfff"}, "\ud801": 1, "d": "fine"}
    assert list(lone_surrogates(value, "")) == ["argument names", "a.1", "b.c"]
    assert list(lone_surrogates("a proper pair \U0001f600", "")) == []
