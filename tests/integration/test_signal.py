"""Signal validation: every bad input names its field; limits hold."""

from __future__ import annotations

import string
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.bus import SignalBus
from daemon.core.signal import MAX_FUTURE_SKEW, MAX_PAYLOAD_BYTES, Signal, SignalRejected
from daemon.store import Store

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
TICK = timedelta(microseconds=1)  # the finest step a timestamp has


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


def test_generated_ids_sort_in_the_order_they_were_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ids the daemon makes are UUIDv7s: made a millisecond apart, they sort by time (so a
    commit of many new signals writes neighbouring entries of the id index), and they are
    unique and valid ids within one millisecond too."""
    clock = iter(range(1_800_000_000_000_000_000, 1_800_000_000_100_000_000, 1_000_000))
    monkeypatch.setattr("daemon.core.signal.time.time_ns", lambda: next(clock))
    made = [Signal.parse(valid(), now=NOW).id for _ in range(50)]
    assert sorted(made) == made and len(set(made)) == 50
    assert {uuid.UUID(i).version for i in made} == {7}
    assert made[0].startswith(f"{1_800_000_000_000:012x}")
    monkeypatch.setattr("daemon.core.signal.time.time_ns", lambda: 1_800_000_000_000_000_000)
    same_millisecond = {Signal.parse(valid(), now=NOW).id for _ in range(1000)}
    assert len(same_millisecond) == 1000


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


@pytest.mark.parametrize(
    "ahead",
    [timedelta(0), timedelta(minutes=4), MAX_FUTURE_SKEW - TICK, MAX_FUTURE_SKEW],
)
def test_emitted_at_up_to_five_minutes_ahead_is_accepted(ahead: timedelta) -> None:
    signal = Signal.parse(valid(emitted_at=(NOW + ahead).isoformat()), now=NOW)
    assert signal.emitted_at == NOW + ahead


@pytest.mark.parametrize("ahead", [MAX_FUTURE_SKEW + TICK, MAX_FUTURE_SKEW + timedelta(seconds=1)])
def test_emitted_at_beyond_five_minutes_ahead_is_refused(ahead: timedelta) -> None:
    with pytest.raises(SignalRejected) as exc:
        Signal.parse(valid(emitted_at=(NOW + ahead).isoformat()), now=NOW)
    assert str(exc.value) == "emitted_at: must not be more than 5 minutes in the future"
    assert timedelta(minutes=5) == MAX_FUTURE_SKEW


@pytest.mark.asyncio
async def test_the_bus_measures_future_skew_on_its_own_clock(store: Store) -> None:
    async with SignalBus(store, [], clock=lambda: NOW) as bus:
        edge = await bus.emit_raw(valid(emitted_at=(NOW + MAX_FUTURE_SKEW).isoformat()))
        with pytest.raises(SignalRejected) as exc:
            await bus.emit_raw(valid(emitted_at=(NOW + MAX_FUTURE_SKEW + TICK).isoformat()))
    assert [e.field for e in exc.value.errors] == ["emitted_at"]
    assert [s.id for s in store.read_sync(lambda tx: tx.signals.listing())] == [edge.id]


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


def is_signal_type(text: str) -> bool:
    """SPEC's rule for ``type``, written out: two or more dot-separated names, each a
    lowercase ASCII letter followed by lowercase letters, digits or underscores."""
    names = text.split(".")
    tail = set(string.ascii_lowercase + string.digits + "_")
    return (
        len(text) <= 128
        and len(names) >= 2
        and all(n[:1] in set(string.ascii_lowercase) and set(n[1:]) <= tail for n in names)
    )


# Valid types, and near misses: one character of a valid type replaced, or one inserted,
# by one of each kind the rule refuses (and by ones it allows elsewhere: a digit or "_"
# first, an empty name).
REFUSED_HERE = [*"A9_-. ", "\n", "\u00e9", "\uff41", "/"]
NAMES = st.tuples(st.sampled_from("abz"), st.text(st.sampled_from("az09_"), max_size=3)).map(
    "".join
)
VALID_TYPES = st.lists(NAMES, min_size=2, max_size=4).map(".".join)


def edited(valid: str, at: int, character: str, insert: bool) -> str:
    at %= len(valid) + 1
    return valid[:at] + character + valid[at + (0 if insert else 1) :]


NEAR_MISSES = st.builds(
    edited, VALID_TYPES, st.integers(0, 20), st.sampled_from(REFUSED_HERE), st.booleans()
)


def every_single_edit(valid: str) -> list[str]:
    return sorted(
        {
            edited(valid, at, character, insert)
            for at in range(len(valid) + 1)
            for character in REFUSED_HERE
            for insert in (True, False)
        }
    )


def accepted(candidate: str) -> bool:
    try:
        signal = Signal.parse(valid(type=candidate), now=NOW)
    except SignalRejected as exc:
        assert {e.field for e in exc.errors} == {"type"}
        return False
    assert signal.type == candidate
    return True


def test_every_single_character_edit_of_a_type_is_judged_by_the_rule() -> None:
    wrong = [c for c in every_single_edit("ab.c_d9.e") if accepted(c) != is_signal_type(c)]
    assert wrong == []


@settings(max_examples=300)
@given(VALID_TYPES | NEAR_MISSES | st.text(max_size=10))
def test_a_type_is_accepted_exactly_when_it_follows_the_rule(candidate: str) -> None:
    assert accepted(candidate) == is_signal_type(candidate), repr(candidate)


@settings(max_examples=150)
@given(
    st.one_of(
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
