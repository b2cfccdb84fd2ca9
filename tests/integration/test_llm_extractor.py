"""The ``openai`` extractor, run for real against a scripted chat-completions server on a
loopback port: the consolidation receptor, the bus, the store and the files are the real
ones; only the model is scripted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog
from chat_server import ChatServer, Reply, chat_server, facts
from support import FAST_RETRY, T0, emit_and_settle, last_error, make_signal
from test_consolidation import BERLIN, FailingArchive, all_marks, clock, write_day

from daemon.bus import RetryPolicy, SignalBus
from daemon.files.daily import DailyLog
from daemon.llm.client import ChatClient
from daemon.store import Store
from receptors.consolidation import ConsolidationReceptor
from receptors.llm.extractor import OpenAIExtractor
from receptors.observation import ObservationReceptor

DAY = date(2026, 4, 11)
DAY_TEXT = [
    "Morning run along the canal.",
    "Lunch with Arnold, he's moving to Lisbon in May.",
    "Deep work on Cambium until six.",
]
ARNOLD = ("people.arnold.home", "Arnold is moving to Lisbon in May.", 2, 2)
RUNNING = ("user.exercise.running", "Runs along the canal in the morning.", 1, 1)
ONE_TRY = RetryPolicy(max_attempts=1)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as running:
        yield running


class Llm:
    """The extractor's settings for one test, and the waits it asked for."""

    def __init__(self, server: ChatServer, **settings: Any) -> None:
        self.waits: list[float] = []
        self.timeout = settings.pop("timeout", 10.0)
        self.extractor = OpenAIExtractor(
            ChatClient(
                base_url=server.url,
                model="test-model",
                api_key="test-key-0123456789",
                timeout=self.timeout,
                sleep=self._sleep,  # Retry-After is asked of the clock, not slept through
            ),
            **settings,
        )

    async def _sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    def receptor(self, store: Store, daily: DailyLog) -> ConsolidationReceptor:
        return ConsolidationReceptor(store, daily, self.extractor, zone=BERLIN, decay_days=14)


def consolidate(day: date = DAY, **fields: Any) -> Any:
    return make_signal(
        "memory.consolidate", {"date": day.isoformat()}, source_id="rhythm:consolidation", **fields
    )


async def run_day(
    store: Store,
    tmp_path: Path,
    llm: Llm,
    lines: list[str] = DAY_TEXT,
    retry: RetryPolicy = ONE_TRY,
) -> tuple[str, str]:
    daily = DailyLog(tmp_path / "daily")
    write_day(tmp_path / "daily", DAY, lines)
    async with SignalBus(store, [llm.receptor(store, daily)], retry=retry, clock=clock) as bus:
        signal = consolidate()
        outcome = await emit_and_settle(bus, signal)
    return outcome["consolidation"], signal.id


@pytest.mark.asyncio
async def test_a_good_answer_becomes_inferred_marks_citing_the_right_lines(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    server.say(facts(ARNOLD, RUNNING))
    outcome, signal_id = await run_day(store, tmp_path, Llm(server))
    assert outcome == "delivered"
    marks = {m.subject: m for m in all_marks(store)}
    assert set(marks) == {"people.arnold.home", "user.exercise.running"}
    arnold = marks["people.arnold.home"]
    assert arnold.observation == "Arnold is moving to Lisbon in May."
    assert arnold.evidence == {
        "daily_file": "2026-04-11.md",
        "line_range": [2, 2],
        "signal_ids": [signal_id],
    }
    assert arnold.provenance == "inferred"
    assert DailyLog(tmp_path / "daily").read(DAY, archived=True) == DAY_TEXT

    (request,) = server.requests
    assert request["model"] == "test-model"
    assert request["response_format"]["type"] == "json_schema"
    assert server.headers[0]["Authorization"] == "Bearer test-key-0123456789"
    assert "2: Lunch with Arnold, he's moving to Lisbon in May." in server.user_texts()[0]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "wrapped",
    [
        "```json\n{answer}\n```",
        "Sure! Here is what I found:\n\n{answer}\n\nLet me know if you need anything else.",
    ],
    ids=["fenced", "chatty"],
)
async def test_fenced_or_chatty_json_is_understood(
    store: Store, tmp_path: Path, server: ChatServer, wrapped: str
) -> None:
    server.say(wrapped.replace("{answer}", facts(ARNOLD)))
    outcome, _ = await run_day(store, tmp_path, Llm(server))
    assert outcome == "delivered"
    assert [m.subject for m in all_marks(store)] == ["people.arnold.home"]
    assert len(server.requests) == 1


@pytest.mark.asyncio
async def test_a_schema_violation_is_shown_to_the_model_and_a_good_retry_is_used(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    missing_observation = json.dumps(
        {"facts": [{"subject": "people.arnold", "line_range": [2, 2], "affinity": []}]}
    )
    server.say(missing_observation, facts(ARNOLD))
    outcome, _ = await run_day(store, tmp_path, Llm(server))
    assert outcome == "delivered"
    assert [m.subject for m in all_marks(store)] == ["people.arnold.home"]
    assert len(server.requests) == 2
    retry = server.requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": missing_observation}
    assert "facts.0.observation" in retry[-1]["content"]


@pytest.mark.asyncio
async def test_three_bad_answers_kill_the_delivery_with_no_marks_and_the_answer_logged(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    server.say("I'd rather not.", '{"facts": "none"}', "still no JSON here")
    with structlog.testing.capture_logs() as logs:
        outcome, signal_id = await run_day(store, tmp_path, Llm(server), retry=RetryPolicy(5))
    assert outcome == "dead", "an invalid answer is not retried by the bus"
    assert len(server.requests) == 3
    assert all_marks(store) == []
    assert "no usable answer" in (last_error(store, signal_id) or "")
    invalid = [e for e in logs if e["event"] == "llm answer invalid"]
    assert [e["answer"] for e in invalid] == [
        "I'd rather not.",
        '{"facts": "none"}',
        "still no JSON here",
    ]
    # Nothing archived: the day is consolidated whole, later, or not at all. Its lines stay
    # claimed (not live, not merged) until a later consolidation takes the claim up again.
    daily = DailyLog(tmp_path / "daily")
    assert daily.read(DAY, archived=True) is None
    assert daily.position(DAY) == len(DAY_TEXT)


@pytest.mark.asyncio
async def test_a_long_invalid_answer_is_logged_truncated(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    server.say(*["x" * 50_000] * 3)
    with structlog.testing.capture_logs() as logs:
        outcome, _ = await run_day(store, tmp_path, Llm(server))
    assert outcome == "dead"
    logged = [e for e in logs if e["event"] == "llm answer invalid"]
    assert all(len(e["answer"]) == 2000 and e["answer_chars"] == 50_000 for e in logged)


@pytest.mark.asyncio
async def test_a_server_that_does_not_answer_in_time_fails_the_delivery(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    server.say(Reply(hang=True))
    outcome, signal_id = await run_day(store, tmp_path, Llm(server, timeout=0.5))
    assert outcome == "dead"
    assert "did not answer within 0.5 s" in (last_error(store, signal_id) or "")
    assert all_marks(store) == []
    assert DailyLog(tmp_path / "daily").position(DAY) == len(DAY_TEXT)  # claimed, kept


@pytest.mark.asyncio
async def test_a_timeout_is_retried_by_the_bus_and_a_later_answer_is_used(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    server.say(Reply(hang=True), facts(ARNOLD))
    retry = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05)
    outcome, _ = await run_day(store, tmp_path, Llm(server, timeout=0.5), retry=retry)
    assert outcome == "delivered"
    assert [m.subject for m in all_marks(store)] == ["people.arnold.home"]


@pytest.mark.asyncio
async def test_a_429_is_waited_out_as_retry_after_says(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    server.say(
        Reply(status=429, headers={"Retry-After": "7"}, body='{"error": "slow down"}'),
        facts(ARNOLD),
    )
    llm = Llm(server)
    outcome, _ = await run_day(store, tmp_path, llm)
    assert outcome == "delivered"
    assert llm.waits == [7.0]
    assert len(server.requests) == 2
    assert [m.subject for m in all_marks(store)] == ["people.arnold.home"]


@pytest.mark.asyncio
async def test_rate_limited_beyond_the_bounded_waits_fails_the_delivery(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    server.say(*[Reply(status=429, headers={"Retry-After": "2"}, body="{}")] * 4)
    llm = Llm(server)
    outcome, signal_id = await run_day(store, tmp_path, llm)
    assert outcome == "dead"
    assert llm.waits == [2.0, 2.0, 2.0]
    assert "answered 429" in (last_error(store, signal_id) or "")


@pytest.mark.asyncio
async def test_a_line_range_outside_the_day_is_refused_and_asked_again(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    outside = facts(("people.arnold.home", "Arnold is moving to Lisbon.", 2, 9))
    server.say(outside, facts(ARNOLD))
    outcome, _ = await run_day(store, tmp_path, Llm(server))
    assert outcome == "delivered"
    assert [m.evidence["line_range"] for m in all_marks(store)] == [[2, 2]]
    problem = server.requests[1]["messages"][-1]["content"]
    assert "[2, 9] is not within the lines shown, 1 to 3" in problem


@pytest.mark.asyncio
async def test_a_long_day_is_chunked_with_overlap_and_a_boundary_fact_is_kept_once(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    lines = [f"Line {n} of an ordinary day." for n in range(1, 61)]
    lines[23:26] = ["Arnold called:", "he is moving to Lisbon", "in May, for good."]
    server.say(
        facts(("user.food.breakfast", "Eats porridge.", 3, 3), (*ARNOLD[:2], 24, 25)),
        facts((*ARNOLD[:2], 24, 26), ("user.work.focus", "Works best before noon.", 30, 30)),
        facts(("user.sleep.bedtime", "Goes to bed late.", 50, 50)),
    )
    outcome, _ = await run_day(store, tmp_path, Llm(server, max_lines_per_call=25), lines)
    assert outcome == "delivered"
    shown = server.user_texts()
    assert len(shown) == 3
    # Chunks of 25 lines overlapping by 5: 1-25, 21-45, 41-60.
    assert "lines 1 to 25" in shown[0] and "lines 21 to 45" in shown[1]
    assert "lines 41 to 60" in shown[2] and "\n60: " in shown[2]
    marks = {m.subject: m.evidence["line_range"] for m in all_marks(store)}
    assert marks == {
        "user.food.breakfast": [3, 3],
        "people.arnold.home": [24, 26],
        "user.work.focus": [30, 30],
        "user.sleep.bedtime": [50, 50],
    }


@pytest.mark.asyncio
async def test_no_marks_at_all_when_a_later_chunk_fails(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    lines = [f"Line {n}." for n in range(1, 41)]
    server.say(facts(("user.food.breakfast", "Eats porridge.", 3, 3)), "no", "no", "no")
    outcome, _ = await run_day(store, tmp_path, Llm(server, max_lines_per_call=25), lines)
    assert outcome == "dead"
    assert all_marks(store) == [], "never a partial consolidation"


SECRET_DAY = [
    "Rotated the key: OPENAI_API_KEY=sk-proj-Zx81kLmN0pQrStUvWxYz12345678",
    "wifi password: correct-horse-battery",
    "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl'",
    "Lunch with Arnold, he's moving to Lisbon in May.",
]
SECRETS = ["sk-proj-Zx81kLmN0pQrStUvWxYz12345678", "correct-horse-battery", "eyJhbGciOiJIUzI1NiJ9"]


@pytest.mark.asyncio
async def test_keys_and_passwords_never_reach_the_server_or_the_log(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    server.say("not json", facts((*ARNOLD[:2], 4, 4)))
    with structlog.testing.capture_logs() as logs:
        outcome, _ = await run_day(store, tmp_path, Llm(server), SECRET_DAY)
    assert outcome == "delivered"
    sent = json.dumps(server.requests)
    assert not [secret for secret in SECRETS if secret in sent]
    assert "password: [REDACTED]" in server.user_texts()[0]
    assert "4: Lunch with Arnold" in server.user_texts()[0], "line numbers are kept"
    logged = json.dumps(logs, default=str)
    assert not [secret for secret in SECRETS if secret in logged]
    # The day itself stays as written: redaction is only for what leaves the machine.
    assert DailyLog(tmp_path / "daily").read(DAY, archived=True) == SECRET_DAY


@pytest.mark.asyncio
async def test_the_prompt_carries_the_nearest_existing_subjects(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    async with SignalBus(store, [ObservationReceptor()], clock=clock) as bus:
        for subject, text in [
            ("user.food.lunch", "Lunch is usually soup."),
            ("user.sleep.bedtime", "In bed by eleven."),
        ]:
            observed = make_signal(
                "memory.observation",
                {"subject": subject, "observation": text, "evidence": {"note": "test"}},
            )
            await emit_and_settle(bus, observed)
    server.say(facts(("user.food.lunch", "Had lentil soup for lunch.", 1, 1)))
    outcome, _ = await run_day(store, tmp_path, Llm(server), ["Lentil soup for lunch again."])
    assert outcome == "delivered"
    prompt = server.user_texts()[0]
    assert "- user.food.lunch" in prompt
    assert "user.sleep.bedtime" not in prompt, "only subjects near the day's words"


@pytest.mark.asyncio
async def test_an_extraction_that_nearly_copies_a_mark_reinforces_it(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    async with SignalBus(store, [ObservationReceptor()], clock=clock) as bus:
        observed = make_signal(
            "memory.observation",
            {
                "subject": "people.arnold.home",
                "observation": "Arnold is moving to Lisbon in May",
                "evidence": {"note": "told me"},
            },
            emitted_at=T0 - timedelta(days=3),
        )
        await emit_and_settle(bus, observed)
    server.say(facts(ARNOLD))
    outcome, _ = await run_day(store, tmp_path, Llm(server))
    assert outcome == "delivered"
    (mark,) = all_marks(store)
    assert mark.reinforcement_count == 1 and mark.provenance == "observed"
    (boost,) = store.read_sync(lambda tx: tx.marks.reinforcements_of([mark.id]))[mark.id]
    assert boost.evidence["daily_file"] == "2026-04-11.md"
    assert boost.evidence["line_range"] == [2, 2]


@pytest.mark.asyncio
async def test_a_retry_after_a_crash_reuses_what_the_model_said_the_first_time(
    store: Store, tmp_path: Path, server: ChatServer
) -> None:
    # The archive fails once after the marks are written; asked again, the model would word
    # the fact differently, which must not become a second mark.
    server.say(facts(ARNOLD), facts(("people.arnold", "Arnold relocates to Lisbon.", 2, 2)))
    daily = FailingArchive(tmp_path / "daily", failures=1)
    write_day(tmp_path / "daily", DAY, DAY_TEXT)
    receptor = Llm(server).receptor(store, daily)
    async with SignalBus(store, [receptor], retry=FAST_RETRY, clock=clock) as bus:
        assert await emit_and_settle(bus, consolidate()) == {"consolidation": "delivered"}
    assert [(m.subject, m.reinforcement_count) for m in all_marks(store)] == [
        ("people.arnold.home", 0)
    ]
    assert len(server.requests) == 1
    assert daily.read(DAY, archived=True) == DAY_TEXT
