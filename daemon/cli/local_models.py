"""Model servers already running on this machine, for ``cambium init`` to offer as ``[llm]``.

Only the usual loopback endpoints are asked, each with a short timeout and no proxy (a
proxy from the environment would carry the question off the machine): Ollama's
``GET /api/tags`` on 11434 and the OpenAI-compatible ``GET /v1/models`` of llama.cpp's
server (and llama-cpp-python's, vLLM's) on 8080. A port where nothing listens is refused at
once; one that answers something else than a model list is not a model server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PROBE_TIMEOUT = 0.5  # seconds per endpoint: a local server answers in milliseconds


@dataclass(frozen=True)
class Endpoint:
    """Where a kind of server is asked for its models, and the base URL [llm] then uses."""

    name: str
    port: int
    kind: str  # "ollama": GET /api/tags; "openai": GET /v1/models

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"  # Ollama serves the OpenAI API at /v1 too


@dataclass(frozen=True)
class LocalServer:
    endpoint: Endpoint
    models: tuple[str, ...]


USUAL_ENDPOINTS = (
    Endpoint("Ollama", 11434, "ollama"),
    Endpoint("llama.cpp server (OpenAI-compatible)", 8080, "openai"),
)


def _models(kind: str, answer: Any) -> tuple[str, ...] | None:
    """The model names in a model list, or None if ``answer`` is not one."""
    key, field = ("models", "name") if kind == "ollama" else ("data", "id")
    items = answer.get(key) if isinstance(answer, dict) else None
    if not isinstance(items, list):
        return None
    return tuple(str(item[field]) for item in items if isinstance(item, dict) and field in item)


def probe(endpoints: Sequence[Endpoint] = USUAL_ENDPOINTS) -> list[LocalServer]:
    """The endpoints that answer with a list of models, with their models."""
    import httpx

    found = []
    for endpoint in endpoints:
        path = "/api/tags" if endpoint.kind == "ollama" else "/v1/models"
        try:
            response = httpx.get(
                f"http://127.0.0.1:{endpoint.port}{path}", timeout=PROBE_TIMEOUT, trust_env=False
            )
            answer = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            continue
        models = _models(endpoint.kind, answer)
        if models:
            found.append(LocalServer(endpoint, models))
    return found


def llm_section(server: LocalServer, model: str) -> str:
    """The ``[llm]`` section using ``model`` on ``server``."""
    return (
        f"\n[llm]\n# Found by `cambium init` ({server.endpoint.name}).\n"
        f'base_url = "{server.endpoint.base_url}"\n'
        f"model = {json.dumps(model)}\n"  # a JSON string is a TOML basic string
    )


def with_llm(config_text: str, section: str) -> str:
    """``config_text`` (as ``cambium init`` renders it) consolidating with the language
    model that the ``[llm]`` ``section`` names."""
    text = re.sub(
        r'^extractor = "mock".*$',
        'extractor = "openai"                # a language model reads the day: [llm] below',
        config_text,
        count=1,
        flags=re.MULTILINE,
    )
    return text.rstrip("\n") + "\n" + section
