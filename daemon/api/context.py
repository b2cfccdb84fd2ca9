"""``GET /v1/context``: recall as a prompt-ready block of text (see
:mod:`daemon.services.context`)."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Query

from daemon.core.clock import Clock
from daemon.services import context
from daemon.services.recall import Memory, RecallQuery, recall


def context_router(memory: Memory, clock: Clock) -> APIRouter:
    router = APIRouter()

    @router.get("/v1/context", summary="What the memory knows, as a bounded block for a prompt")
    async def context_route(
        about: str = "",
        max_chars: int = Query(4000, ge=context.MIN_CHARS, le=context.MAX_CHARS),
        layers: str | None = None,
        horizon: str | None = None,
        min_strength: float | None = None,
        limit: int = 10,
        include_withered: bool = False,
        workspace: str | None = None,
    ) -> dict[str, Any]:
        query = RecallQuery.model_validate(
            {
                "about": about,
                "layers": layers,
                "horizon": horizon,
                "min_strength": min_strength,
                "limit": limit,
                "include_withered": include_withered,
                "workspace": workspace,
            }
        )
        result = await anyio.to_thread.run_sync(recall, query, memory, clock())
        return context.render(result.to_json(), query.about, max_chars).to_json()

    return router
