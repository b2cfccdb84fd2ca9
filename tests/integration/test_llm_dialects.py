"""Local model servers' dialects, emulated by the scripted chat server: which
``response_format`` a server takes is learnt from what its refusal says (whatever the status
code) and remembered per endpoint and model; an answer cut off at the token limit splits
the chunk instead of being asked for again unchanged."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from chat_server import LLAMA_CPP_PYTHON_REFUSAL, ChatServer, Reply, chat_server, facts
from support import last_error
from test_consolidation import all_marks
from test_llm_extractor import ARNOLD, DAY, DAY_TEXT, RUNNING, Llm, run_day

from daemon.bus import RetryPolicy
from daemon.llm.client import LLMError
from daemon.store import Store
from receptors.llm.answer import SCHEMA

CUT_OFF = '{"facts": [{"subject": "people.arnold", "observation": "Arnold is mov'
NOT_SUPPORTED = Reply(status=400, body='{"error": "response_format is not supported"}')
# What OpenAI answers a reasoning model asked with max_tokens.
MAX_TOKENS_REFUSED = Reply(
    status=400,
    body='{"error": {"message": "Unsupported parameter: \'max_tokens\' is not supported with '
    'this model. Use \'max_completion_tokens\' instead.", "type": "invalid_request_error", '
    '"param": "max_tokens", "code": "unsupported_parameter"}}',
)
# What servers answer a request longer than the model's context: llama-cpp-python (as OpenAI
# and vLLM word it), and llama.cpp's own server.
OVER_THE_CONTEXT = {
    "llama-cpp-python": Reply(
        status=400,
        body='{"error": {"message": "This model\'s maximum context length is 512 tokens. '
        "However, you requested 801 tokens (801 in the messages, None in the completion). "
        'Please reduce the length of the messages or completion.", '
        '"type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}',
    ),
    "llama.cpp": Reply(
        status=400,
        body='{"error": {"code": 400, "message": "request (801 tokens) exceeds the available '
        'context size (512 tokens)", "type": "exceed_context_size_error", '
        '"n_prompt_tokens": 801, "n_ctx": 512}}',
    ),
}


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as running:
        yield running


def formats(server: ChatServer) -> list[str | None]:
    return [(body.get("response_format") or {}).get("type") for body in server.requests]


@pytest.mark.asyncio
async def test_llama_cpp_pythons_500_refusal_leads_to_json_object_with_the_schema(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    server.refuses["json_schema"] = LLAMA_CPP_PYTHON_REFUSAL
    server.say(facts(ARNOLD))
    outcome, _ = await run_day(store, tmp_path, Llm(server))
    assert outcome == "delivered"
    assert [m.subject for m in all_marks(store)] == ["people.arnold.home"]
    assert formats(server) == ["json_schema", "json_object"]
    assert server.requests[1]["response_format"] == {"type": "json_object", "schema": SCHEMA}


@pytest.mark.asyncio
async def test_the_dialect_learnt_is_remembered_for_the_endpoint_and_model(
    server: ChatServer,
) -> None:
    server.refuses["json_schema"] = LLAMA_CPP_PYTHON_REFUSAL
    server.say(facts(RUNNING), facts(ARNOLD))
    first, second = Llm(server), Llm(server)  # a new client, as the daemon builds one per use
    await first.extractor.extract(DAY, DAY_TEXT)
    await second.extractor.extract(DAY, DAY_TEXT)
    assert formats(server) == ["json_schema", "json_object", "json_object"]


@pytest.mark.asyncio
async def test_a_server_that_takes_no_response_format_is_asked_in_words(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    server.refuses["json_schema"] = NOT_SUPPORTED
    server.refuses["json_object"] = NOT_SUPPORTED
    server.say(facts(ARNOLD))
    outcome, _ = await run_day(store, tmp_path, Llm(server))
    assert outcome == "delivered"
    assert formats(server) == ["json_schema", "json_object", None]
    assert "only" in server.requests[2]["messages"][0]["content"].lower()


@pytest.mark.asyncio
async def test_a_500_that_does_not_name_the_format_is_an_error_not_a_dialect(
    server: ChatServer,
) -> None:
    server.say(Reply(status=500, body='{"error": "out of memory"}'))
    with pytest.raises(LLMError, match="answered 500"):
        await Llm(server).extractor.extract(DAY, DAY_TEXT)
    assert formats(server) == ["json_schema"]


@pytest.mark.asyncio
async def test_an_answer_cut_off_at_the_token_limit_splits_the_chunk_down_to_one_line(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    cut = Reply(CUT_OFF, finish_reason="length")
    # lines 1-3 cut; line 1 answers; lines 2-3 cut; line 2 answers; line 3 cut: given up.
    server.say(cut, facts(RUNNING), cut, facts(ARNOLD), cut)
    with structlog.testing.capture_logs() as logs:
        outcome, _ = await run_day(store, tmp_path, Llm(server))
    assert outcome == "delivered"
    assert {m.subject for m in all_marks(store)} == {"people.arnold.home", "user.exercise.running"}
    asked = [re.findall(r"lines (\d+ to \d+):", text)[0] for text in server.user_texts()]
    assert asked == [
        "1 to 3",
        "1 to 1",
        "2 to 3",
        "2 to 2",
        "3 to 3",
    ]
    gave_up = [e for e in logs if e["event"] == "llm answer cut off on one line: nothing taken"]
    assert [e["lines"] for e in gave_up] == ["3-3"]
    assert all(len(body["messages"]) == 2 for body in server.requests), "never the same again"
    # Each request's answer is capped by the lines it asks about: 200 + 60 a line.
    assert [body["max_tokens"] for body in server.requests] == [380, 260, 320, 260, 260]


@pytest.mark.asyncio
async def test_a_half_of_blank_lines_is_not_asked_about(server: ChatServer) -> None:
    server.say(Reply(CUT_OFF, finish_reason="length"), facts(RUNNING))
    found = await Llm(server).extractor.extract(DAY, [DAY_TEXT[0], "", "  "])
    assert [f.subject for f in found] == ["user.exercise.running"]
    assert len(server.requests) == 2, "lines 2-3 are blank: no request for them"


@pytest.mark.asyncio
async def test_the_instructions_give_the_answers_shape_with_no_fact_a_model_could_copy(
    server: ChatServer,
) -> None:
    server.say(facts())
    await Llm(server).extractor.extract(DAY, DAY_TEXT)
    instructions = server.requests[0]["messages"][0]["content"]
    assert '{"facts": [...]}' in instructions
    for key in ("subject", "observation", "line_range", "affinity"):
        assert f"- {key}:" in instructions
    # gemma3-270m answered every day with the example fact shown here, word for word.
    assert not re.search(r'"(subject|observation|line_range)": ', instructions)


@pytest.mark.asyncio
@pytest.mark.parametrize("refusal", sorted(OVER_THE_CONTEXT))
async def test_a_request_over_the_models_context_is_asked_for_in_halves(
    store: Store, tmp_path: Path, server: ChatServer, refusal: str
) -> None:
    server.say(OVER_THE_CONTEXT[refusal], facts(RUNNING), facts(ARNOLD))
    outcome, _ = await run_day(store, tmp_path, Llm(server))
    assert outcome == "delivered"
    assert {m.subject for m in all_marks(store)} == {"people.arnold.home", "user.exercise.running"}
    asked = [re.findall(r"lines (\d+ to \d+):", text)[0] for text in server.user_texts()]
    assert asked == ["1 to 3", "1 to 1", "2 to 3"]


@pytest.mark.asyncio
async def test_one_line_over_the_context_fails_the_day_naming_the_setting_to_raise(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    refused = OVER_THE_CONTEXT["llama-cpp-python"]
    server.say(refused, refused)
    outcome, signal_id = await run_day(store, tmp_path, Llm(server), retry=RetryPolicy(5))
    assert outcome == "dead", "the same lines would not fit the next time either"
    error = last_error(store, signal_id) or ""
    assert "line 1 does not fit the model's context" in error
    assert "--n_ctx" in error and "--ctx-size" in error and "maximum context length" in error
    assert all_marks(store) == []
    assert len(server.requests) == 2, "lines 1-3, then line 1 alone: then it stops"


@pytest.mark.asyncio
async def test_a_server_that_refuses_max_tokens_is_asked_without_it_from_then_on(
    server: ChatServer,
) -> None:
    server.say(MAX_TOKENS_REFUSED, facts(ARNOLD), facts(RUNNING))
    first = await Llm(server).extractor.extract(DAY, DAY_TEXT)
    second = await Llm(server).extractor.extract(DAY, DAY_TEXT)
    assert [f.subject for f in [*first, *second]] == ["people.arnold.home", "user.exercise.running"]
    assert ["max_tokens" in body for body in server.requests] == [True, False, False]
    assert formats(server) == ["json_schema"] * 3, "the dialect is not what was refused"
