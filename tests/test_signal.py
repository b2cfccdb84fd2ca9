"""Signal validation: every bad input names its field; limits hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.core.signal import MAX_PAYLOAD_BYTES, Signal, SignalRejected

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def valid(**overrides: Any) -> dict[str, Any]:
    return {"type": "memory.observation", "source_id": "agent-1", **overrides}


def fields_of(exc: pytest.ExceptionInfo[SignalRejected]) -> set[str]:
    return {error.field for error in exc.value.errors}


def test_defaults_are_filled() -> None:
    signal = Signal.parse(valid(), now=NOW)
    assert signal.signal_class == "knowledge"
    assert signal.source_layer == "agent"
    assert signal.intensity == 0.7
    assert signal.decay_rate == 14 * 86400
    assert signal.emitted_at == NOW
    assert signal.payload == {} and signal.affinity == []
    assert len(signal.id) == 32


def test_class_is_accepted_under_its_wire_name() -> None:
    signal = Signal.parse(valid(**{"class": "lifecycle"}), now=NOW)
    assert signal.signal_class == "lifecycle"
    assert signal.to_json_dict()["class"] == "lifecycle"


def test_json_text_is_accepted() -> None:
    signal = Signal.parse(
        '{"type": "a.b", "source_id": "x", "emitted_at": "2026-11-30T11:00:00+01:00"}', now=NOW
    )
    assert signal.emitted_at == datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"type": "Memory.Observation"}, "type"),
        ({"type": "memory"}, "type"),
        ({"type": "memory..x"}, "type"),
        ({"source_id": ""}, "source_id"),
        ({"intensity": 1.5}, "intensity"),
        ({"intensity": "0.5"}, "intensity"),
        ({"decay_rate": -1}, "decay_rate"),
        ({"cascade_potential": "yes"}, "cascade_potential"),
        ({"payload": [1, 2]}, "payload"),
        ({"affinity": "food"}, "affinity"),
        ({"emitted_at": "2026-11-30T12:00:00"}, "emitted_at"),
        ({"emitted_at": "2026-11-30T12:06:00Z"}, "emitted_at"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_bad_fields_are_named(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(SignalRejected) as exc:
        Signal.parse(valid(**overrides), now=NOW)
    assert field in fields_of(exc)


def test_missing_source_id_is_named() -> None:
    with pytest.raises(SignalRejected) as exc:
        Signal.parse({"type": "a.b"}, now=NOW)
    assert fields_of(exc) == {"source_id"}
    assert "source_id: Field required" in str(exc.value)


def test_emitted_at_up_to_five_minutes_ahead_is_fine() -> None:
    Signal.parse(valid(emitted_at=(NOW + timedelta(minutes=4)).isoformat()), now=NOW)


def test_oversized_payload_is_refused() -> None:
    with pytest.raises(SignalRejected) as exc:
        Signal.parse(valid(payload={"blob": "x" * 60_000, "more": ["y" * 60_000] * 4}), now=NOW)
    assert fields_of(exc) == {"payload"}
    assert str(MAX_PAYLOAD_BYTES) in str(exc.value)


def test_deep_payload_is_refused() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(SignalRejected) as exc:
        Signal.parse(valid(payload=deep), now=NOW)
    assert fields_of(exc) == {"payload"}


@settings(max_examples=150)
@given(
    st.one_of(
        st.text().filter(lambda t: not t[:1].islower() or "." not in t).map(lambda t: ("type", t)),
        st.one_of(st.integers(), st.none(), st.booleans()).map(lambda v: ("source_id", v)),
        st.floats(allow_nan=True).filter(lambda f: not 0 <= f <= 1).map(lambda f: ("intensity", f)),
        st.text(max_size=5).map(lambda t: ("payload", t)),
    )
)
def test_generated_bad_fields_are_named(case: tuple[str, Any]) -> None:
    field, value = case
    with pytest.raises(SignalRejected) as exc:
        Signal.parse(valid(**{field: value}), now=NOW)
    assert field in fields_of(exc)
