"""The twins: every public method of :class:`Client` exists in :class:`AsyncClient` with the
same signature (a coroutine there, a function here), and neither has one the other lacks;
recall's and context's keyword arguments are the wire schema's query fields."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest

from daemon.client import AsyncClient, Client
from daemon.schema.recall import ContextQuery, RecallQuery

# The same thing under the names each world expects.
RENAMED = {"close": "aclose", "__enter__": "__aenter__", "__exit__": "__aexit__"}


def public_methods(cls: type) -> dict[str, Callable[..., object]]:
    return {
        name: member
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") or name in RENAMED or name in RENAMED.values()
    }


def differences(sync: type, asynchronous: type) -> list[str]:
    """Where ``asynchronous`` is not ``sync``'s twin (empty: they are twins)."""
    ours, theirs = public_methods(sync), public_methods(asynchronous)
    found = []
    for name, method in ours.items():
        twin = theirs.pop(RENAMED.get(name, name), None)
        if twin is None:
            found.append(f"{name}: missing from {asynchronous.__name__}")
        elif not inspect.iscoroutinefunction(twin) or inspect.iscoroutinefunction(method):
            found.append(f"{name}: must be a function in {sync.__name__}, a coroutine in the twin")
        elif inspect.signature(method) != inspect.signature(twin):
            found.append(f"{name}: {inspect.signature(method)} != {inspect.signature(twin)}")
    found += [f"{name}: only in {asynchronous.__name__}" for name in theirs]
    return found


def test_the_async_client_is_the_sync_clients_twin() -> None:
    assert differences(Client, AsyncClient) == []


def test_the_twins_offer_retract_and_undo_review() -> None:
    assert {"retract", "undo_review"} <= set(public_methods(AsyncClient))


@pytest.mark.parametrize(
    ("method", "query", "not_taken"),
    [
        (Client.recall, RecallQuery, set()),
        (Client.context, ContextQuery, {"summary"}),  # a block is never summarised
    ],
)
def test_recall_takes_every_field_of_the_query(
    method: Callable[..., object], query: type[RecallQuery], not_taken: set[str]
) -> None:
    parameters = set(inspect.signature(method).parameters) - {"self"}
    assert parameters == set(query.model_fields) - not_taken


def test_a_synthetic_drift_is_caught() -> None:
    class Sync:
        def read(self, key: str) -> str:
            return key

        def write(self, key: str) -> None:
            pass

    class Async:
        async def read(self, key: str, extra: int = 0) -> str:
            return key

        async def only_here(self) -> None:
            pass

    read, write, only_here = differences(Sync, Async)
    assert read.startswith("read: (self, key: 'str') -> 'str' != ") and "extra" in read
    assert (write, only_here) == ("write: missing from Async", "only_here: only in Async")
