"""``/v1/recall``: what the memory knows about something."""

from __future__ import annotations

from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Query, Request

from daemon.api.deps import Running
from daemon.schema.recall import RecallQuery
from daemon.services.recall import recall
from daemon.services.summary import with_summary

router = APIRouter(prefix="/v1/recall", tags=["recall"])


async def recall_query(request: Request) -> RecallQuery:
    """The query parameters of recall (and of context), checked: 422 names the field.
    (Async so that FastAPI calls it in the loop, not in a worker thread.)"""
    return RecallQuery.from_params(request.query_params)


def query_parameters() -> list[dict[str, Any]]:
    """The recall query's fields as OpenAPI query parameters (the route reads them itself)."""
    schema = RecallQuery.model_json_schema()
    return [
        {"name": name, "in": "query", "required": False, "schema": field}
        for name, field in schema["properties"].items()
    ]


Recalled = Annotated[RecallQuery, Depends(recall_query)]


@router.get(
    "",
    summary="What the memory knows about something",
    openapi_extra={"parameters": query_parameters()},
)
async def recall_route(
    services: Running,
    query: Recalled,
    explain: Annotated[
        bool,
        Query(
            description="Each mark also says how its strength got there (initial strength, "
            "half-life, age, each reinforcement) and how it ended: what `cambium memory "
            "recall` shows a person."
        ),
    ] = False,
) -> dict[str, Any]:
    result = await anyio.to_thread.run_sync(recall, query, services.memory, services.clock())
    if query.summary:
        result = await with_summary(result, query.about, services.memory.llm)
    return result.to_json(explain=explain)
