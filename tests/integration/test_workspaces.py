"""Two workspaces in one store: each sees, reinforces, reviews and withers only its own."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support import FAST_RETRY, T0, emit_and_settle, last_error, make_signal
from test_marks_store import make_mark

from daemon.bus import SignalBus
from daemon.core.records import Seed, derived_id
from daemon.files.compost import Compost
from daemon.files.daily import DailyLog
from daemon.files.substrate import Substrate
from daemon.schema.recall import RecallQuery
from daemon.services.recall import Memory, recall
from daemon.store import Store
from receptors.consolidation import wither_sweep
from receptors.observation import ObservationReceptor
from receptors.seeds import SeedReceptor

WORKSPACES = ("home", "work")
MARK_STATES = ("active", "withered", "promoted")
OBSERVATION = {
    "subject": "user.food.figs",
    "observation": "likes figs",
    "evidence": {"note": "said so"},
}


def in_workspace(workspace: str, signal_type: str, payload: dict[str, Any], **fields: Any) -> Any:
    return make_signal(signal_type, payload, workspace_id=workspace, **fields)


def layers(store: Store, root: Path, workspace: str) -> Memory:
    return Memory(
        store=store,
        substrate=Substrate([]),
        daily=DailyLog(root / "daily"),
        compost=Compost(root / "compost"),
        workspace=workspace,
        zone=ZoneInfo("UTC"),
    )


@pytest.mark.asyncio
async def test_marks_and_recall_stay_in_their_workspace(store: Store, tmp_path: Path) -> None:
    async with SignalBus(store, [ObservationReceptor()]) as bus:
        for workspace in WORKSPACES:  # the very same observation in each workspace
            await emit_and_settle(bus, in_workspace(workspace, "memory.observation", OBSERVATION))
        await emit_and_settle(
            bus,
            in_workspace(
                "work", "memory.observation", OBSERVATION | {"subject": "user.food.dates"}
            ),
        )
    home = store.read_sync(lambda tx: tx.marks.find("home", "user"))
    work = store.read_sync(lambda tx: tx.marks.find("work", "user"))
    assert [(m.subject, m.reinforcement_count) for m in home] == [("user.food.figs", 0)]
    assert sorted(m.subject for m in work) == ["user.food.dates", "user.food.figs"]
    assert {m.workspace_id for m in work} == {"work"}, "the repeat was not a reinforcement"

    query = RecallQuery(about="user.food", layers=("marks",))
    recalled = {
        workspace: sorted(
            h.mark.subject for h in recall(query, layers(store, tmp_path, workspace), T0).marks
        )
        for workspace in (*WORKSPACES, "elsewhere")
    }
    assert recalled == {
        "home": ["user.food.figs"],
        "work": ["user.food.dates", "user.food.figs"],
        "elsewhere": [],
    }
    scored = store.read_sync(lambda tx: tx.marks.score("home", "", ("active",), T0))
    assert [s.mark_id for s in scored] == [home[0].id]


@pytest.mark.asyncio
async def test_seeds_and_reviews_stay_in_their_workspace(store: Store) -> None:
    plant = {"subject": "user.food", "proposed_change": "add figs", "target_file": "a.md"}
    async with SignalBus(store, [SeedReceptor()], retry=FAST_RETRY) as bus:
        planted = {}
        for workspace in WORKSPACES:
            signal = in_workspace(workspace, "memory.seed_planted", plant)
            await emit_and_settle(bus, signal)
            planted[workspace] = derived_id("sd", signal.id)
        listed = {
            w: [s.id for s in store.read_sync(lambda tx, w=w: tx.seeds.listing(w))]
            for w in WORKSPACES
        }
        assert listed == {w: [planted[w]] for w in WORKSPACES}

        # home's reviewer names work's seed: refused as unknown, and the seed stays pending.
        review = {"seed_id": planted["work"], "decision": "accepted", "reviewer": "ada"}
        crossing = in_workspace("home", "memory.seed_reviewed", review)
        assert await emit_and_settle(bus, crossing) == {"seeds": "dead"}
        assert last_error(store, crossing.id) == f"payload.seed_id: no seed {planted['work']}"
        own = in_workspace("work", "memory.seed_reviewed", review)
        assert await emit_and_settle(bus, own) == {"seeds": "delivered"}

    def state(workspace: str) -> Seed:
        seed = store.read_sync(lambda tx: tx.seeds.get(planted[workspace], workspace))
        assert seed is not None
        return seed

    assert (state("home").state, state("work").state) == ("pending", "accepted")
    assert store.read_sync(lambda tx: tx.seeds.get(planted["work"], "home")) is None


def test_the_wither_sweep_withers_only_its_workspace(store: Store) -> None:
    faded = {"initial_strength": 0.3, "first_observed_at": T0 - timedelta(days=60)}
    marks = [make_mark(f"{w}-old", "user.old", workspace_id=w, **faded) for w in WORKSPACES]
    store.write_sync(lambda tx: tx.marks.insert(marks))
    assert store.write_sync(lambda tx: wither_sweep(tx, "home", T0)) == ["home-old"]
    states = {
        w: [m.state for m in store.read_sync(lambda tx, w=w: tx.marks.find(w, "", MARK_STATES))]
        for w in WORKSPACES
    }
    assert states == {"home": ["withered"], "work": ["active"]}
