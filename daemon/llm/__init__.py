"""Language models behind an OpenAI-compatible chat-completions endpoint, as the ``[llm]``
config describes: the client and the redaction that the ``openai`` extractor
(:mod:`receptors.llm`) and recall summaries (:mod:`daemon.services.summary`) share."""

from __future__ import annotations

from daemon.config import LLMConfig
from daemon.llm.client import ChatClient, read_api_key


def chat_client(llm: LLMConfig) -> ChatClient:
    """A client for the ``[llm]`` endpoint. Raises ValueError (an ApiKeyError naming the
    config key) when the key cannot be read."""
    return ChatClient(
        base_url=llm.base_url,
        model=llm.model,
        api_key=read_api_key(llm.api_key_env, llm.api_key_file),
        timeout=llm.timeout,
        temperature=llm.temperature,
        max_answer_bytes=llm.max_answer_bytes,
    )
