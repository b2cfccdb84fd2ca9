"""Recall summaries, against a scripted chat-completions server on a loopback port: grounded
in the returned items, citing them, and null whenever no model gives a usable answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import structlog
from chat_server import ChatServer, Reply, chat_server

from daemon.config import LLMConfig
from daemon.core.records import Mark
from daemon.core.strength import strength
from daemon.search.daily import DailyHit
from daemon.services.recall_result import MarkHit, RecallResult
from daemon.services.summary import with_summary

T0 = datetime(2026, 4, 11, 10, tzinfo=UTC)


def mark_hit(mark_id: str, subject: str, observation: str) -> MarkHit:
    mark = Mark(
        id=mark_id,
        workspace_id="default",
        subject=subject,
        observation=observation,
        evidence={"note": "test"},
        initial_strength=0.7,
        half_life_days=14,
        observed_by="agent",
        first_observed_at=T0,
        last_reinforced_at=T0,
        provenance="inferred",
        created_at=T0,
        updated_at=T0,
    )
    return MarkHit(mark, strength(0.7, 14, T0, (), T0))


RESULT = RecallResult(
    substrate=[],
    marks=[mark_hit("mk_arnold", "people.arnold.home", "Arnold is moving to Lisbon in May.")],
    daily=[DailyHit("2026-04-11", "Lunch with Arnold. Door code password=4711x", (2, 2), False)],
    compost=[],
)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as started:
        yield started


def llm(server: ChatServer) -> LLMConfig:
    return LLMConfig(base_url=server.url, model="test-model", timeout=5)


def answer(text: str) -> str:
    return json.dumps({"answer": text})


@pytest.mark.asyncio
async def test_the_summary_answers_from_the_items_citing_them(server: ChatServer) -> None:
    server.say(answer("Arnold moves to Lisbon in May [mk_arnold], said at lunch [daily-1]."))
    result = await with_summary(RESULT, "arnold", llm(server))
    assert result.summary == "Arnold moves to Lisbon in May [mk_arnold], said at lunch [daily-1]."
    assert result.to_json()["summary"] == result.summary
    prompt = server.user_texts()[0]
    assert "what do I know about arnold?" in prompt
    assert "[mk_arnold] people.arnold.home: Arnold is moving to Lisbon in May." in prompt
    assert "[daily-1] log of 2026-04-11, line 2: Lunch with Arnold." in prompt
    assert "4711x" not in json.dumps(server.requests), "items are redacted like daily lines"


@pytest.mark.asyncio
async def test_an_answer_citing_what_it_was_not_given_is_asked_again(server: ChatServer) -> None:
    server.say(answer("Arnold lives in Porto [mk_other]."), answer("In May [mk_arnold]."))
    result = await with_summary(RESULT, "arnold", llm(server))
    assert result.summary == "In May [mk_arnold]."
    assert "mk_other" in server.requests[1]["messages"][-1]["content"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "replies",
    [
        [answer("No citation here."), "not even json"],
        [Reply(status=500, body='{"error": "model crashed"}')],
    ],
    ids=["ungrounded", "server-error"],
)
async def test_no_usable_answer_leaves_the_summary_null_and_says_why_in_the_log(
    server: ChatServer, replies: list[Reply | str]
) -> None:
    server.say(*replies)
    with structlog.testing.capture_logs() as logs:
        result = await with_summary(RESULT, "arnold", llm(server))
    assert result.summary is None
    assert result.marks == RESULT.marks, "recall still answers"
    assert any(e["log_level"] == "warning" for e in logs)


@pytest.mark.asyncio
async def test_without_a_model_or_without_items_no_request_is_made(server: ChatServer) -> None:
    assert (await with_summary(RESULT, "arnold", None)).summary is None
    assert (await with_summary(RESULT, "arnold", LLMConfig(base_url=server.url))).summary is None
    empty = RecallResult(substrate=[], marks=[], daily=[], compost=[])
    assert (await with_summary(empty, "arnold", llm(server))).summary is None
    assert server.requests == []
