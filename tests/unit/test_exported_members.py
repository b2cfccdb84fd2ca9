"""The package faces: what ``from daemon.client import *`` (or schema, mcp) gives is exactly
``__all__``, and every public name a face holds is in it, so nothing leaks out of the private
modules by accident and nothing promised goes missing."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

FACES = ("daemon.client", "daemon.schema", "daemon.mcp")


def drift(module: ModuleType) -> list[str]:
    """How ``module``'s public names and its ``__all__`` disagree (empty: they agree)."""
    exported = list(getattr(module, "__all__", ()))
    for name in exported:  # a face may import its names when first asked (PEP 562)
        getattr(module, name, None)
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    }
    problems = [f"{name}: public but not in __all__" for name in sorted(public - set(exported))]
    problems += [f"{name}: in __all__ but missing" for name in exported if name not in public]
    if exported != sorted(set(exported)):
        problems.append("__all__: not sorted, or a name twice")
    return problems


@pytest.mark.parametrize("face", FACES)
def test_a_face_exports_exactly_its_all(face: str) -> None:
    assert drift(importlib.import_module(face)) == []


def test_the_client_face_names_what_it_exports_from_private_modules() -> None:
    client = importlib.import_module("daemon.client")
    assert {"Client", "AsyncClient", "Recall", "SeedItem", "OutcomeUnknown"} <= set(client.__all__)
    assert all(not getattr(client, name).__module__.startswith("daemon.client.") or
               getattr(client, name).__module__.split(".")[-1].startswith("_")
               for name in client.__all__)  # fmt: skip


@pytest.mark.parametrize(
    ("names", "problem"),
    [
        ({"Client": object, "helper": object, "__all__": ["Client"]}, "helper: public but"),
        ({"Client": object, "__all__": ["Client", "Gone"]}, "Gone: in __all__ but missing"),
        ({"B": object, "A": object, "__all__": ["B", "A"]}, "not sorted"),
    ],
)
def test_a_synthetic_drift_is_caught(names: dict[str, object], problem: str) -> None:
    module = ModuleType("face")
    vars(module).update(names)
    [found] = drift(module)
    assert problem in found
