"""The ``openai`` extractor: a day's lines become facts by asking a language model.

- Lines are redacted before they are sent (:mod:`daemon.llm.redact`), and they are
  never logged.
- A long day is sent in chunks of ``max_lines_per_call`` lines that overlap by
  ``overlap_lines``, so a fact written across a chunk boundary is seen whole by one call;
  the same fact found by two calls is kept once.
- Each answer is validated (:mod:`receptors.llm.answer`). An unusable one is shown back to
  the model with what is wrong, up to ``max_attempts`` answers per chunk; after that the
  extraction fails as a whole (:class:`ExtractionFailed`, which the bus marks dead at once)
  with the raw answer logged, truncated. Nothing is returned until every chunk succeeded,
  so a day is consolidated completely or not at all.
- An answer the server cut off at its token limit (``finish_reason: length``) is not asked
  for again unchanged (it would be cut off again): the chunk is split in halves, each asked
  on its own, down to single lines. A single line whose answer is still cut off yields
  nothing, with a warning naming the line: the model cannot say what it holds within its
  limit, asking again would not change that, and failing the day for it would keep every
  other line's facts out of the memory. The line itself stays in the archived day, where
  recall still finds it.
- A request the server refuses as too long for the model's context
  (:class:`~daemon.llm.client.ContextExceeded`) is split the same way. A single line that
  still does not fit fails the extraction, naming the line and the server setting to raise:
  the server is set up too small to read the day, and every line skipped would be a fact
  silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date

import structlog

from daemon.bus import Undeliverable
from daemon.core.likeness import DEFAULT_SIMILARITY, is_near_copy
from daemon.llm.client import ChatClient, ContextExceeded, InvalidAnswer
from daemon.llm.redact import redact_lines
from receptors.extractors import Extraction
from receptors.llm.answer import SCHEMA, Fact, parse_answer
from receptors.llm.prompt import extraction_messages, nearest_subjects, retry_messages

log = structlog.get_logger("cambium.llm")

LOGGED_ANSWER_CHARS = 2000
# The answer's token budget, by the lines asked about: generous for facts (a fact, JSON and
# all, is about 50 tokens; even a dense log holds about one a line), and a bound on a small
# model that loops until the server's limit (gemma3-270m spent over 10 minutes of two
# shared cores on one 20-line day without it). A cut-off answer splits the chunk, so each
# half gets a budget of its own.
ANSWER_TOKENS = 200
ANSWER_TOKENS_PER_LINE = 60
INFERRED_STRENGTH = 0.6  # a model's reading of a day is weaker evidence than a stated fact


class ExtractionFailed(Undeliverable):
    """The model gave no usable answer for part of the day, however often it was asked."""


class _TooLong(Exception):
    """Asking about these lines ran into a token limit: the answer was cut off
    (``context`` None), or the request did not fit the model's context."""

    def __init__(self, context: ContextExceeded | None = None) -> None:
        super().__init__()
        self.context = context


def chunk_ranges(total: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """1-indexed inclusive line ranges of at most ``size`` lines covering ``1..total``, each
    starting ``overlap`` lines before the previous one ended."""
    if overlap >= size:
        raise ValueError("overlap must be smaller than the chunk size")
    ranges: list[tuple[int, int]] = []
    start = 1
    while start <= total:
        end = min(start + size - 1, total)
        ranges.append((start, end))
        if end == total:
            break
        start = end - overlap + 1
    return ranges


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] + 1 and b[0] <= a[1] + 1


def merge_duplicates(found: Sequence[Extraction], threshold: float) -> list[Extraction]:
    """One extraction per fact: a near-copy of an earlier one (same subject, or lines that
    overlap it) is folded into it, widening its line range when their lines touch."""
    kept: list[Extraction] = []
    for item in found:
        for index, earlier in enumerate(kept):
            same_place = earlier.subject == item.subject or _overlaps(
                earlier.line_range, item.line_range
            )
            if same_place and is_near_copy(earlier.observation, item.observation, threshold):
                if _overlaps(earlier.line_range, item.line_range):
                    widened = (
                        min(earlier.line_range[0], item.line_range[0]),
                        max(earlier.line_range[1], item.line_range[1]),
                    )
                    kept[index] = replace(earlier, line_range=widened)
                break
        else:
            kept.append(item)
    return kept


@dataclass
class OpenAIExtractor:
    client: ChatClient
    max_lines_per_call: int = 200
    overlap_lines: int = 5
    max_attempts: int = 3
    similarity: float = DEFAULT_SIMILARITY
    name: str = field(default="openai", init=False)

    async def extract(
        self, day: date, lines: Sequence[str], known_subjects: Sequence[str] = ()
    ) -> list[Extraction]:
        redacted = redact_lines(lines)
        found: list[Extraction] = []
        for first, last in chunk_ranges(len(lines), self.max_lines_per_call, self.overlap_lines):
            chunk = redacted[first - 1 : last]
            if not any(line.strip() for line in chunk):
                continue
            numbered = list(enumerate(chunk, start=first))
            subjects = nearest_subjects(known_subjects, chunk)
            facts = await self._facts(day, numbered, subjects)
            found.extend(_extraction(fact) for fact in facts)
        merged = merge_duplicates(found, self.similarity)
        log.info("llm extracted", day=day.isoformat(), facts=len(found), kept=len(merged))
        return merged

    async def _facts(
        self, day: date, numbered: list[tuple[int, str]], subjects: list[str]
    ) -> list[Fact]:
        """The facts in ``numbered``, asked for in halves while answers are cut off."""
        if not any(text.strip() for _, text in numbered):
            return []  # a half of blank lines holds nothing to ask about
        try:
            return await self._ask(day, numbered, subjects)
        except _TooLong as exc:
            lines = f"{numbered[0][0]}-{numbered[-1][0]}"
            if len(numbered) == 1 and exc.context is not None:
                raise ExtractionFailed(
                    f"{day.isoformat()} line {numbered[0][0]} does not fit the model's context "
                    f"beside the instructions ({exc.context}); give the model server a larger "
                    "context (llama.cpp: --ctx-size; llama-cpp-python: --n_ctx; "
                    "Ollama: num_ctx)"
                ) from None
            if len(numbered) == 1:
                log.warning(
                    "llm answer cut off on one line: nothing taken",
                    day=day.isoformat(),
                    lines=lines,
                )
                return []
            why = "answer cut off" if exc.context is None else "request over the context"
            log.info("llm: asking for each half", why=why, day=day.isoformat(), lines=lines)
        half = len(numbered) // 2
        return [
            *await self._facts(day, numbered[:half], subjects),
            *await self._facts(day, numbered[half:], subjects),
        ]

    async def _ask(
        self, day: date, numbered: list[tuple[int, str]], subjects: list[str]
    ) -> list[Fact]:
        first, last = numbered[0][0], numbered[-1][0]
        conversation = extraction_messages(day, numbered, subjects)
        messages = conversation
        budget = ANSWER_TOKENS + ANSWER_TOKENS_PER_LINE * len(numbered)
        for attempt in range(1, self.max_attempts + 1):
            try:
                completion = await self.client.chat(messages, SCHEMA, budget)
            except ContextExceeded as exc:
                raise _TooLong(exc) from None
            answer = completion.text
            try:
                return parse_answer(answer, first, last)
            except InvalidAnswer as exc:
                if completion.cut_off:
                    raise _TooLong from None
                problem = str(exc)
            log.warning(
                "llm answer invalid",
                day=day.isoformat(),
                lines=f"{first}-{last}",
                attempt=attempt,
                problem=problem,
                answer=answer[:LOGGED_ANSWER_CHARS],
                answer_chars=len(answer),
            )
            messages = retry_messages(conversation, answer, problem)
        raise ExtractionFailed(
            f"the model gave no usable answer for {day.isoformat()} lines {first}-{last} "
            f"in {self.max_attempts} attempts; last problem: {problem}"
        )


def _extraction(fact: Fact) -> Extraction:
    return Extraction(
        subject=fact.subject,
        observation=fact.observation,
        line_range=fact.line_range,
        affinity=tuple(fact.affinity),
        initial_strength=INFERRED_STRENGTH,
        provenance="inferred",
    )
