"""``/v1/context``: recall as a prompt-ready block of text (see
:mod:`daemon.services.context`)."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Query

from daemon.api.deps import Running
from daemon.api.recall import Recalled
from daemon.services import context
from daemon.services.recall import recall

router = APIRouter(prefix="/v1/context", tags=["recall"])


@router.get("", summary="What the memory knows, as a bounded block for a prompt")
async def context_route(
    services: Running,
    query: Recalled,
    max_chars: int = Query(4000, ge=context.MIN_CHARS, le=context.MAX_CHARS),
) -> dict[str, Any]:
    result = await anyio.to_thread.run_sync(recall, query, services.memory, services.clock())
    return context.render(result.to_json(), query.about, max_chars).to_json()
