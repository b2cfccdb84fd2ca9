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

Each name is imported when first used (PEP 562), so that importing one part (the errors, or
the sync client without httpx) does not pull in the others.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
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

# The module that defines each name.
_HOMES = {
    name: module
    for module, names in (
        ("daemon.client._async_client", "AsyncClient"),
        ("daemon.client._client", "Client"),
        (
            "daemon.client._errors",
            "CambiumError Conflict DaemonError NotFound NotReachable OutcomeUnknown Rejected "
            "Unavailable",
        ),
        (
            "daemon.schema.answers",
            "CompostItem ContextBlock DailyItem DeliveryItem Discard Discarded Emitted Health "
            "MarkItem Recall Retried Reviewed SeedItem StoredSignal SubstrateItem",
        ),
    )
    for name in names.split()
}

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


def __getattr__(name: str) -> _typing.Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # once found, an attribute like any other
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
