"""JSON as the store keeps it and the size limits count it: compact (no spaces), UTF-8 as it
is (no ``\\u`` escapes for what is not ASCII), written by orjson, which costs a tenth of the
standard library's encoder. What orjson refuses (an integer beyond 64 bits) is written by
the standard library in the same form."""

from __future__ import annotations

import json
from typing import Any

import orjson


def json_bytes(value: Any) -> bytes:
    """``value`` as compact JSON, UTF-8 encoded."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def json_text(value: Any) -> str:
    """``value`` as compact JSON text (what a JSON column stores)."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
