"""A small Python client for the Cambium daemon, sync (:class:`Client`) and async
(:class:`AsyncClient`), over the Unix socket or loopback TCP with a bearer token.

Answers are typed (:mod:`daemon.schema.answers`); failures are typed
(:class:`CambiumError` and its kinds). Every write carries an idempotency key (given, or generated
and returned on the answer), so a write whose answer was lost (:class:`OutcomeUnknown`) can
be sent again safely with the same key.

    from daemon.client import Client

    with Client() as memory:  # the socket of the default config
        memory.observe("user.food.lunch", "likes lentil soup", source_id="my-agent", wait=10)
        for mark in memory.recall("lentil").marks:
            print(mark.subject, mark.observation, round(mark.current_strength, 2))
"""

from daemon.client._async_client import AsyncClient
from daemon.client._client import Client
from daemon.client._errors import (
    CambiumError,
    Conflict,
    DaemonError,
    NotFound,
    NotReachable,
    OutcomeUnknown,
    Rejected,
    Unavailable,
)
from daemon.schema.answers import (
    CompostItem,
    ContextBlock,
    DailyItem,
    DeliveryItem,
    Discard,
    Discarded,
    Emitted,
    Health,
    MarkItem,
    Recall,
    Retried,
    Reviewed,
    SeedItem,
    StoredSignal,
    SubstrateItem,
)

__all__ = [
    "AsyncClient",
    "CambiumError",
    "Client",
    "CompostItem",
    "Conflict",
    "ContextBlock",
    "DaemonError",
    "DailyItem",
    "DeliveryItem",
    "Discard",
    "Discarded",
    "Emitted",
    "Health",
    "MarkItem",
    "NotFound",
    "NotReachable",
    "OutcomeUnknown",
    "Recall",
    "Rejected",
    "Retried",
    "Reviewed",
    "SeedItem",
    "StoredSignal",
    "SubstrateItem",
    "Unavailable",
]
