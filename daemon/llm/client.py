"""A small client for any OpenAI-compatible chat-completions endpoint (llama.cpp's server,
Ollama, vLLM, hosted APIs), on httpx.

It asks for JSON constrained by a schema in one of three dialects, the first a server takes:
``response_format: json_schema`` (OpenAI, vLLM, llama.cpp's own server, Ollama),
``json_object`` with the schema beside it (llama-cpp-python's server), or no
``response_format`` at all (the prompt itself also demands JSON only). A refusal is known by
what it says (its body names ``response_format`` or ``json_schema``), whatever its status:
llama-cpp-python answers ``json_schema`` with a 500. The dialect a server took is remembered
per endpoint and model for the process's life, so it is learnt once, not on every request.
The answer may be capped (``max_tokens``, which every local server takes); a server that
refuses the cap naming it (OpenAI's reasoning models) is asked without it, and that too is
remembered. A 429 or 503 is waited out as its ``Retry-After`` says, a bounded number of times. A
request too long for the model's context is a :class:`ContextExceeded` (known by what the
refusal says), so that the caller can send less. Anything else that keeps an answer from
arriving is an :class:`LLMError`, which fails the delivery and lets the bus retry it later.

What comes back is bounded and redacted before anyone keeps it. An answer is read in pieces
and given up past ``max_answer_bytes`` (:class:`AnswerTooLarge`), so a runaway model cannot
fill the daemon's memory. Secrets in it are cut out as on the way out
(:mod:`daemon.llm.redact`): in a JSON answer string by string, so it stays JSON; in an
error's message (a server's error page may echo the key it was sent) as text.

The API key comes from an environment variable or from a file only its owner can read;
never from the config text. Request bodies are never logged (they hold the user's lines).
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx
import structlog

from daemon.llm.redact import redact_text, redact_value

log = structlog.get_logger("cambium.llm")

Message = dict[str, str]
MAX_ANSWER_BYTES = 4 * 1024 * 1024

Dialect = Literal["json_schema", "json_object", "plain"]
DIALECTS: tuple[Dialect, ...] = ("json_schema", "json_object", "plain")  # tried in order
# Endpoint and model -> the dialect it took: one for the whole daemon, which builds a client
# per use of the [llm] config (extraction, summaries) for the same server.
LEARNT_DIALECTS: dict[tuple[str, str], Dialect] = {}
# Endpoints and models that refused ``max_tokens`` (OpenAI's reasoning models take only
# ``max_completion_tokens``, which local servers do not all know): asked without a cap since.
UNCAPPED: set[tuple[str, str]] = set()

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_CONTEXT_EXCEEDED = re.compile(
    r"maximum context length|context_length_exceeded|exceeds? the available context size"
    r"|exceed_context_size",
    re.IGNORECASE,
)


class LLMError(Exception):
    """No usable answer arrived: unreachable, timed out, rate limited too long, refused.
    The message is redacted: it is stored as the delivery's error and logged."""

    def __init__(self, message: str) -> None:
        super().__init__(redact_text(message))


class AnswerTooLarge(LLMError):
    """The answer is over the cap. Retried like any LLMError: a model that ran away (looping
    until its token limit) does so by chance of sampling, not for this input, and the bus
    bounds the retries; each costs at most the cap."""


class ContextExceeded(LLMError):
    """The request does not fit the model's context window. Known by what the server says,
    whatever its status: OpenAI, vLLM and llama-cpp-python ("maximum context length"),
    llama.cpp's server ("exceeds the available context size"). Asking again with the same
    messages cannot succeed; fewer lines might."""


class ApiKeyError(ValueError):
    """The API key cannot be read; the message names the config key and the rule."""


class InvalidAnswer(ValueError):
    """The model's answer cannot be used; the message says why (and is shown to the model
    when it is asked again)."""


def json_text(answer: str) -> str:
    """The JSON object in ``answer``: the whole text, a fenced block, or the outermost braces
    of a chatty reply."""
    text = answer.strip()
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced[1].strip()
    if not text.startswith("{"):
        start, end = text.find("{"), text.rfind("}")
        if start == -1 or end < start:
            raise InvalidAnswer("no JSON object in the answer")
        text = text[start : end + 1]
    return text


def redacted_answer(answer: str) -> str:
    """``answer`` with every secret it holds replaced by ``[REDACTED]``: the strings of its
    JSON object one by one (the object alone, re-serialised, if anything was cut or it came
    wrapped in prose), else the whole text."""
    try:
        found = json_text(answer)
        value = json.loads(found)
    except (InvalidAnswer, ValueError):
        return redact_text(answer)
    redacted = redact_value(value)
    if redacted == value and found == answer.strip():
        return answer
    return json.dumps(redacted, ensure_ascii=False)


def read_api_key(env: str | None, file: Path | None) -> str | None:
    """The key from ``$env`` or from ``file`` (which must not be readable by anyone else)."""
    if env:
        key = os.environ.get(env, "").strip()
        if not key:
            raise ApiKeyError(f"llm.api_key_env: the environment variable {env} is not set")
        return key
    if file is None:
        return None
    try:
        mode = file.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ApiKeyError(
                f"llm.api_key_file: {file} must be readable by its owner only (chmod 600)"
            )
        key = file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ApiKeyError(f"llm.api_key_file: cannot read {file}: {exc.strerror}") from None
    if not key:
        raise ApiKeyError(f"llm.api_key_file: {file} is empty")
    return key


@dataclass(frozen=True)
class Reply:
    """A response read whole (within the cap)."""

    status_code: int
    headers: httpx.Headers
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


def _retry_after(response: Reply, cap: float) -> float:
    """Seconds to wait as the server asks (a number or an HTTP date); 1 s if it does not."""
    value = response.headers.get("retry-after", "").strip()
    seconds = 1.0
    if value:
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = parsedate_to_datetime(value)
                seconds = when.timestamp() - time.time()
            except (TypeError, ValueError):
                seconds = 1.0
    return min(max(seconds, 0.0), cap)


def _refuses(response: Reply, *names: str) -> bool:
    """A server that does not take a field says so naming it, with a 400, a 422 or
    (llama-cpp-python) a 500: what it says counts, not the code."""
    return response.status_code != 200 and any(name in response.text for name in names)


def response_format(dialect: Dialect, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response_format`` asking for ``schema`` in ``dialect`` (None: ask in words)."""
    if dialect == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": schema, "strict": True},
        }
    if dialect == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


@dataclass(frozen=True)
class Completion:
    """The assistant's text and why it stopped: ``length`` means the server's token limit
    cut it off."""

    text: str
    finish_reason: str | None = None
    tokens: int = 0  # prompt and completion, as the server counted them (0: it did not say)

    @property
    def cut_off(self) -> bool:
        return self.finish_reason == "length"


def _completion(reply: Reply) -> Completion:
    try:
        answer = json.loads(reply.content)
        choice = answer["choices"][0]
        content = choice["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise LLMError("the model server's answer is not a chat completion") from None
    usage = answer.get("usage")
    tokens = usage.get("total_tokens") if isinstance(usage, dict) else None
    reason = choice.get("finish_reason") if isinstance(choice, dict) else None
    return Completion(
        text=redacted_answer(content) if isinstance(content, str) else "",
        finish_reason=reason if isinstance(reason, str) else None,
        tokens=tokens if isinstance(tokens, int) else 0,
    )


@dataclass
class ChatClient:
    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    temperature: float = 0.0
    max_waits: int = 3  # how many 429/503 answers are waited out per request
    max_wait_seconds: float = 60.0
    max_answer_bytes: int = MAX_ANSWER_BYTES
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    dialects: dict[tuple[str, str], Dialect] = field(default_factory=lambda: LEARNT_DIALECTS)
    uncapped: set[tuple[str, str]] = field(default_factory=lambda: UNCAPPED)
    tokens_used: int = field(default=0, init=False)  # over this client's life, as counted

    async def complete(self, messages: list[Message], schema: dict[str, Any] | None = None) -> str:
        """The assistant's text for ``messages``; with ``schema``, constrained to it where
        the server can."""
        return (await self.chat(messages, schema)).text

    async def chat(
        self,
        messages: list[Message],
        schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """The completion for ``messages``, in the first dialect the server takes; with
        ``max_tokens``, the answer is cut off there (``finish_reason: length``) where the
        server takes the cap."""
        key = (self.base_url, self.model)
        # Uncompressed, so the bytes counted against the cap are the bytes held.
        headers = {"Accept-Encoding": "identity"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = self.base_url.rstrip("/") + "/chat/completions"
        async with httpx.AsyncClient(timeout=self.timeout, headers=headers) as http:
            while True:
                dialect = self.dialects.get(key, DIALECTS[0]) if schema is not None else "plain"
                cap = None if key in self.uncapped else max_tokens
                body = self._body(messages, schema, dialect, cap)
                response = await self._post(http, url, body)
                if "max_tokens" in body and _refuses(response, "max_tokens"):
                    log.info("llm refused max_tokens: asking without it")
                    self.uncapped.add(key)
                    continue
                if "response_format" not in body or not _refuses(
                    response, "response_format", "json_schema"
                ):
                    break
                following = DIALECTS[DIALECTS.index(dialect) + 1]
                log.info(
                    "llm refused the response_format dialect",
                    dialect=dialect,
                    status=response.status_code,
                    next=following,
                )
                self.dialects[key] = following
        if response.status_code != 200:
            refused = ContextExceeded if _CONTEXT_EXCEEDED.search(response.text) else LLMError
            raise refused(
                f"the model server answered {response.status_code}: "
                f"{redact_text(response.text)[:200]!r}"  # cut after redacting: no half key
            )
        if schema is not None:
            self.dialects[key] = dialect
        completion = _completion(response)
        self.tokens_used += completion.tokens
        return completion

    def _body(
        self,
        messages: list[Message],
        schema: dict[str, Any] | None,
        dialect: Dialect,
        max_tokens: int | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "stream": False,
        }
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        wanted = response_format(dialect, schema) if schema is not None else None
        if wanted is not None:
            body["response_format"] = wanted
        return body

    async def _post(self, http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> Reply:
        waited = 0
        while True:
            try:
                response = await self._read(http, url, body)
            except httpx.TimeoutException:
                raise LLMError(
                    f"the model server did not answer within {self.timeout:g} s"
                ) from None
            except httpx.HTTPError as exc:
                raise LLMError(f"cannot reach the model server at {self.base_url}: {exc}") from None
            if response.status_code not in (429, 503) or waited == self.max_waits:
                return response
            waited += 1
            delay = _retry_after(response, self.max_wait_seconds)
            log.info("llm busy, waiting", status=response.status_code, seconds=delay)
            await self.sleep(delay)

    async def _read(self, http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> Reply:
        """The response to one POST, read in pieces and given up past the cap."""
        async with http.stream("POST", url, json=body) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_answer_bytes:
                raise self._too_large(f"it announced {int(declared)} bytes")
            content = bytearray()
            async for piece in response.aiter_bytes():
                content += piece
                if len(content) > self.max_answer_bytes:
                    raise self._too_large("it sent more")
            return Reply(response.status_code, response.headers, bytes(content))

    def _too_large(self, why: str) -> AnswerTooLarge:
        return AnswerTooLarge(
            f"the model server's answer is over llm.max_answer_bytes "
            f"({self.max_answer_bytes} bytes): {why}; stopped reading"
        )
