"""``/v1/recall``: what the memory knows about something."""

from __future__ import annotations

from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Depends

from daemon.api.deps import Running
from daemon.schema.recall import RecallQuery
from daemon.services.recall import recall
from daemon.services.summary import with_summary

router = APIRouter(prefix="/v1/recall", tags=["recall"])


def recall_query(
    about: str = "",
    layers: str | None = None,
    horizon: str | None = None,
    min_strength: float | None = None,
    limit: int = 10,
    include_withered: bool = False,
    include_history: bool = False,
    workspace: str | None = None,
    provenance: str | None = None,
    summary: bool = False,
) -> RecallQuery:
    """The query parameters of recall (and of context), checked: 422 names the field."""
    return RecallQuery.model_validate(
        {
            "about": about,
            "layers": layers,
            "horizon": horizon,
            "min_strength": min_strength,
            "limit": limit,
            "include_withered": include_withered,
            "include_history": include_history,
            "workspace": workspace,
            "provenance": provenance,
            "summary": summary,
        }
    )


Recalled = Annotated[RecallQuery, Depends(recall_query)]


@router.get("", summary="What the memory knows about something")
async def recall_route(services: Running, query: Recalled) -> dict[str, Any]:
    result = await anyio.to_thread.run_sync(recall, query, services.layers, services.clock())
    if query.summary:
        result = await with_summary(result, query.about, services.layers.llm)
    return result.to_json()
