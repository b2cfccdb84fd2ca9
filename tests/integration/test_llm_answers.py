"""Issue 26, findings 3 and 4: what comes back from the model's side is bounded and
redacted. A huge answer is given up past ``llm.max_answer_bytes`` with the daemon's memory
bounded; a key or password in an error page or an answer is cut out before it is stored as
a mark or a delivery's error, or logged. Against the scripted chat server, for real."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from chat_server import ChatServer, Reply, chat_server, facts
from support import last_error
from test_consolidation import all_marks
from test_llm_extractor import Llm, run_day

from daemon.config import parse_config
from daemon.llm import chat_client
from daemon.llm.client import MAX_ANSWER_BYTES, AnswerTooLarge, ChatClient, redacted_answer
from daemon.store import Store

KEY = "sk-proj-Zx81kLmN0pQrStUvWxYz12345678"
PIECE = "x" * 65_536


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as running:
        yield running


def client(server: ChatServer, max_answer_bytes: int) -> ChatClient:
    return ChatClient(base_url=server.url, model="m", max_answer_bytes=max_answer_bytes)


@pytest.mark.asyncio
async def test_a_huge_answer_is_given_up_at_the_cap_and_never_held_whole(
    server: ChatServer,
) -> None:
    server.say(Reply(body=PIECE, repeat=1024))  # 64 MiB, with no content-length
    tracemalloc.start()
    try:
        with pytest.raises(AnswerTooLarge) as raised:
            await client(server, 1024 * 1024).complete([{"role": "user", "content": "hi"}])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "llm.max_answer_bytes (1048576 bytes)" in str(raised.value)
    assert peak < 8 * 1024 * 1024, f"peak {peak} bytes while reading a 64 MiB answer"


@pytest.mark.asyncio
async def test_an_answer_announced_over_the_cap_is_not_read(server: ChatServer) -> None:
    server.say(Reply(body="x" * 2_000_000))
    with pytest.raises(AnswerTooLarge, match="it announced 2000000 bytes"):
        await client(server, 1_000_000).complete([{"role": "user", "content": "hi"}])


@pytest.mark.asyncio
async def test_an_answer_over_the_cap_fails_the_delivery_naming_the_cap(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    server.say(Reply(body=PIECE, repeat=64))
    llm = Llm(server)
    llm.extractor.client.max_answer_bytes = 1024 * 1024
    outcome, signal_id = await run_day(store, tmp_path, llm)
    assert outcome == "dead" and all_marks(store) == []
    assert "over llm.max_answer_bytes (1048576 bytes)" in (last_error(store, signal_id) or "")


def test_the_cap_is_configured_under_llm() -> None:
    assert chat_client(parse_config({"llm": {"model": "m"}}).llm).max_answer_bytes == (
        MAX_ANSWER_BYTES
    )
    configured = parse_config({"llm": {"model": "m", "max_answer_bytes": 65_536}})
    assert chat_client(configured.llm).max_answer_bytes == 65_536
    with pytest.raises(ValueError, match=r"llm\.max_answer_bytes"):
        parse_config({"llm": {"max_answer_bytes": 10}})


@pytest.mark.asyncio
async def test_a_key_in_an_error_page_is_neither_stored_nor_logged(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    page = json.dumps({"error": {"message": f"Incorrect API key provided:\n{KEY}"}})
    server.say(Reply(status=500, body=page))
    with structlog.testing.capture_logs() as logs:
        outcome, signal_id = await run_day(store, tmp_path, Llm(server))
    assert outcome == "dead"
    error = last_error(store, signal_id) or ""
    assert "answered 500" in error and "[REDACTED]" in error and KEY not in error
    assert KEY not in json.dumps(logs, default=str)


@pytest.mark.asyncio
async def test_a_key_or_password_in_an_answer_never_becomes_a_mark_or_a_log_line(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    chatty = f"Here you go (the password: hunter2hunter2):\n{KEY}"
    told = f"The wifi password is hunter2hunter2; the key is\n{KEY}."
    server.say(chatty, facts(("user.home.wifi", told, 1, 1)))
    with structlog.testing.capture_logs() as logs:
        outcome, _ = await run_day(store, tmp_path, Llm(server))
    assert outcome == "delivered"
    (mark,) = all_marks(store)
    assert mark.observation == "The wifi password is [REDACTED]; the key is\n[REDACTED]."
    logged = json.dumps(logs, default=str)
    assert "hunter2" not in logged and KEY not in logged
    assert "the password: [REDACTED]" in logged


def test_a_redacted_json_answer_stays_json() -> None:
    answer = json.dumps({"facts": [{"observation": f"line one\n{KEY}", "affinity": [KEY]}]})
    redacted = json.loads(redacted_answer(answer))
    assert redacted == {
        "facts": [{"observation": "line one\n[REDACTED]", "affinity": ["[REDACTED]"]}]
    }
    plain = json.dumps({"facts": []})
    assert redacted_answer(plain) is plain, "an answer with nothing to cut is kept as it came"
    assert redacted_answer(f"no JSON, only {KEY}") == "no JSON, only [REDACTED]"
