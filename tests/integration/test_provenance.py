"""Provenance: every mark says whether a human stated it, an agent observed it, or an
extractor inferred it; recall shows it and filters by it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import create_engine, text
from support import T0, emit_and_settle, last_error, make_signal
from test_consolidation import BERLIN, all_marks

from daemon.bus import SignalBus
from daemon.files.compost import Compost
from daemon.files.daily import DailyLog
from daemon.files.substrate import Substrate
from daemon.schema.recall import RecallQuery
from daemon.services.recall import Memory, recall
from daemon.store import Store
from daemon.store.migrate import upgrade
from receptors.observation import ObservationReceptor


def observe(subject: str, text: str, **payload: Any) -> Any:
    body = {"subject": subject, "observation": text, "evidence": {"note": "test"}} | payload
    return make_signal("memory.observation", body)


@pytest.mark.asyncio
async def test_observations_are_observed_unless_they_say_otherwise_and_recall_filters(
    store: Store, tmp_path: Path
) -> None:
    async with SignalBus(store, [ObservationReceptor()]) as bus:
        await emit_and_settle(bus, observe("user.coffee", "takes it black"))
        await emit_and_settle(bus, observe("user.tea", "green, no sugar", provenance="stated"))
        await emit_and_settle(bus, observe("user.mood", "calmer on Fridays", provenance="inferred"))
        bad = observe("user.x", "y", provenance="guessed")
        assert await emit_and_settle(bus, bad) == {"observation": "dead"}
    assert "payload.provenance" in (last_error(store, bad.id) or "")
    assert {m.subject: m.provenance for m in all_marks(store)} == {
        "user.coffee": "observed",
        "user.tea": "stated",
        "user.mood": "inferred",
    }

    memory = Memory(store, Substrate([]), DailyLog(tmp_path), Compost(tmp_path), "default", BERLIN)

    def recalled(**query: Any) -> list[tuple[str, str]]:
        result = recall(RecallQuery(about="user", layers=("marks",), **query), memory, T0)
        return sorted((m["subject"], m["provenance"]) for m in result.to_json()["marks"])

    assert recalled(provenance="stated,inferred") == [
        ("user.mood", "inferred"),
        ("user.tea", "stated"),
    ]
    assert recalled(provenance=["observed"]) == [("user.coffee", "observed")]
    assert len(recalled()) == 3


def test_an_unknown_provenance_filter_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="provenance"):
        RecallQuery(about="user", provenance="guessed")  # type: ignore[arg-type]


def test_the_migration_marks_earlier_hand_stated_marks_as_stated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0001")
    engine = create_engine(url)
    columns = (
        "id, workspace_id, subject, observation, fingerprint, evidence, initial_strength, "
        "decay_rate, observed_by, first_observed_at, last_reinforced_at, reinforcement_count, "
        "affinity, substrate_refs, state, created_at, updated_at"
    )
    with engine.begin() as connection:
        for mark_id, evidence in [
            ("mk_hand", {"note": "stated by ada via cambium memory mark"}),
            ("mk_agent", {"signal_ids": ["s1"]}),
        ]:
            connection.execute(
                text(
                    f"INSERT INTO memory_marks ({columns}) VALUES (:id, 'default', 'user.x', "
                    "'text', '', :evidence, 0.7, 14, 'ada', '2026-04-11 10:00:00', "
                    "'2026-04-11 10:00:00', 0, '[]', '[]', 'active', '2026-04-11 10:00:00', "
                    "'2026-04-11 10:00:00')"
                ),
                {"id": mark_id, "evidence": json.dumps(evidence)},
            )
    upgrade(url)
    with engine.connect() as connection:
        rows = dict(connection.execute(text("SELECT id, provenance FROM memory_marks")).all())
    engine.dispose()
    assert rows == {"mk_hand": "stated", "mk_agent": "observed"}
