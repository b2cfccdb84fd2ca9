"""recall(): four layers blended, evidence-linked, filtered and ranked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError
from test_marks_store import make_mark

from daemon.files.compost import Compost
from daemon.files.daily import DailyLog
from daemon.files.substrate import Substrate
from daemon.schema.recall import RecallQuery
from daemon.services.recall import Memory, recall
from daemon.store import Store

T0 = datetime(2026, 4, 11, tzinfo=UTC)


@pytest.fixture
def memory(store: Store, tmp_path: Path) -> Memory:
    (tmp_path / "long-term").mkdir()
    (tmp_path / "long-term" / "lessons.md").write_text(
        "# Lessons\n\nArnold knows how to cook vegetables properly.\n"
    )
    (tmp_path / "long-term" / "identity.md").write_text("# Identity\n\nI protect my afternoons.\n")
    (tmp_path / "daily").mkdir()
    (tmp_path / "daily" / "2026-04-11.md").write_text(
        "Morning pages.\nArnold recommended 20 min at 180C.\nDeep work.\n"
    )
    return Memory(
        store=store,
        substrate=Substrate([tmp_path / "long-term"]),
        daily=DailyLog(tmp_path / "daily"),
        compost=Compost(tmp_path / "compost"),
        workspace="w",
        zone=ZoneInfo("Europe/Berlin"),
    )


def add(memory: Memory, mark_id: str, subject: str, **overrides: Any) -> None:
    mark = make_mark(mark_id, subject, **overrides)
    memory.store.write_sync(lambda tx: tx.marks.insert([mark]))


def vegetables(memory: Memory, mark_id: str = "m1", **overrides: Any) -> None:
    add(
        memory,
        mark_id,
        "user.food.vegetables",
        observation="Arnold recommended 180C for 20 min",
        evidence={"daily_file": "2026-04-11.md", "line_range": [2, 2]},
        substrate_refs=["long-term/lessons.md"],
        **overrides,
    )


def test_a_mark_brings_its_substrate_file_and_its_daily_line(memory: Memory) -> None:
    vegetables(memory)
    result = recall(RecallQuery(about="user.food"), memory, T0 + timedelta(hours=10))
    assert [m.mark.id for m in result.marks] == ["m1"]
    [lessons] = result.substrate
    assert lessons.file.endswith("/long-term/lessons.md")
    assert lessons.reason == "referenced by mark m1"
    assert "cook vegetables" in lessons.excerpt
    assert [(d.date, d.line_range, d.excerpt) for d in result.daily] == [
        ("2026-04-11", (2, 2), "Arnold recommended 20 min at 180C.")
    ]
    assert result.compost == []


def test_the_json_is_exactly_the_documented_shape(memory: Memory) -> None:
    vegetables(memory)
    out = recall(RecallQuery(about="user.food"), memory, T0).to_json()
    assert list(out) == ["substrate", "marks", "daily", "compost", "summary"]
    assert out["summary"] is None
    assert set(out["substrate"][0]) == {"file", "excerpt", "reason"}
    assert set(out["marks"][0]) == {
        "id", "subject", "observation", "current_strength", "state", "observed_by",
        "first_observed_at", "last_reinforced_at", "reinforcement_count", "provenance",
            "evidence",
    }  # fmt: skip
    assert out["marks"][0]["first_observed_at"] == "2026-04-11T00:00:00Z"
    assert out["daily"][0] == {
        "date": "2026-04-11",
        "excerpt": "Arnold recommended 20 min at 180C.",
        "line_range": [2, 2],
    }


def test_layers_filter(memory: Memory) -> None:
    vegetables(memory)
    result = recall(RecallQuery(about="user.food", layers=("marks",)), memory, T0)
    assert len(result.marks) == 1
    assert result.substrate == result.daily == result.compost == []


def test_min_strength_drops_a_faded_mark(memory: Memory) -> None:
    vegetables(memory, "old", first_observed_at=T0 - timedelta(days=21))
    assert recall(RecallQuery(about="user.food", min_strength=0.2), memory, T0).marks == []
    kept = recall(RecallQuery(about="user.food", min_strength=0.1), memory, T0).marks
    assert [m.mark.id for m in kept] == ["old"]


def test_marks_sorted_strongest_then_most_recent(memory: Memory) -> None:
    add(memory, "week-old", "user.food.a", first_observed_at=T0 - timedelta(days=7))
    add(memory, "fresh", "user.food.b")
    add(memory, "fresh-later", "user.food.c", last_reinforced_at=T0 + timedelta(hours=1))
    ids = [
        m.mark.id
        for m in recall(RecallQuery(about="user.food"), memory, T0 + timedelta(hours=1)).marks
    ]
    assert ids == ["fresh-later", "fresh", "week-old"]


def test_limit_and_segment_prefix(memory: Memory) -> None:
    for n in range(5):
        add(memory, f"m{n}", f"user.sleep.n{n}")
    add(memory, "over", "user.sleepover")
    ids = [m.mark.id for m in recall(RecallQuery(about="user.sleep", limit=3), memory, T0).marks]
    assert len(ids) == 3 and "over" not in ids


def test_withered_only_when_asked(memory: Memory) -> None:
    add(memory, "faded", "user.x", state="withered")
    add(memory, "kept", "user.y", state="promoted")
    assert [m.mark.id for m in recall(RecallQuery(about="user"), memory, T0).marks] == ["kept"]
    both = recall(RecallQuery(about="user", include_withered=True), memory, T0).marks
    assert sorted(m.mark.id for m in both) == ["faded", "kept"]


def test_horizon_limits_marks_by_last_reinforcement(memory: Memory) -> None:
    add(memory, "recent", "user.a", half_life_days=0.0)
    add(memory, "older", "user.b", half_life_days=0.0, last_reinforced_at=T0 - timedelta(days=10))
    now = T0 + timedelta(hours=1)
    ids = {m.mark.id for m in recall(RecallQuery(about="user", horizon="7d"), memory, now).marks}
    assert ids == {"recent"}
    ids = {m.mark.id for m in recall(RecallQuery(about="user", horizon="30d"), memory, now).marks}
    assert ids == {"recent", "older"}
    ids = {
        m.mark.id
        for m in recall(RecallQuery(about="user", horizon="2026-04-01"), memory, now).marks
    }
    assert ids == {"recent", "older"}


def test_archived_days_count_only_within_the_horizon(memory: Memory) -> None:
    memory.daily.append(datetime(2026, 3, 1).date(), "Kayaking in the cold.")
    memory.daily.archive(datetime(2026, 3, 1).date())
    memory.daily.append(datetime(2026, 4, 10).date(), "Kayaking again.")
    memory.daily.archive(datetime(2026, 4, 10).date())
    query = RecallQuery(about="kayaking", layers=("daily",))
    assert [d.date for d in recall(query, memory, T0).daily] == ["2026-04-10"]
    wide = RecallQuery(about="kayaking", layers=("daily",), horizon="all")
    assert sorted(d.date for d in recall(wide, memory, T0).daily) == ["2026-03-01", "2026-04-10"]


def test_the_horizon_filters_live_daily_files_too(memory: Memory) -> None:
    """Issue 11, finding 14: an old day never consolidated stayed in every answer."""
    memory.daily.append(datetime(2026, 3, 1).date(), "Canoeing, a day never consolidated.")
    memory.daily.append(datetime(2026, 4, 10).date(), "Canoeing again.")
    query = RecallQuery(about="canoeing", layers=("daily",), horizon="7d")
    assert [d.date for d in recall(query, memory, T0).daily] == ["2026-04-10"]
    wide = RecallQuery(about="canoeing", layers=("daily",), horizon="all")
    assert sorted(d.date for d in recall(wide, memory, T0).daily) == ["2026-03-01", "2026-04-10"]


def test_free_text_finds_substrate_and_daily_by_words(memory: Memory) -> None:
    result = recall(RecallQuery(about="cooking vegetables"), memory, T0)
    assert result.substrate[0].file.endswith("lessons.md")
    assert result.substrate[0].reason.startswith("matched tokens:")
    assert result.marks == []


@pytest.mark.parametrize(
    ("fields", "bad"),
    [
        ({"layers": "marks,dreams"}, "layers"),
        ({"horizon": "yesterday"}, "horizon"),
        ({"horizon": "2026-04-01T10:00:00"}, "horizon"),
        ({"min_strength": 2}, "min_strength"),
        ({"limit": 0}, "limit"),
        ({"about": "x" * 1025}, "about"),
    ],
)
def test_bad_queries_name_the_field(fields: dict[str, Any], bad: str) -> None:
    with pytest.raises(ValidationError) as exc:
        RecallQuery.model_validate({"about": "x"} | fields)
    assert exc.value.errors()[0]["loc"][0] == bad


def test_asking_for_withered_marks_without_a_minimum_means_any_strength() -> None:
    assert RecallQuery(about="x").min_strength == 0.1
    assert RecallQuery.model_validate({"about": "x", "include_withered": True}).min_strength == 0
    explicit = {"about": "x", "include_withered": True, "min_strength": 0.3}
    assert RecallQuery.model_validate(explicit).min_strength == 0.3


def test_free_words_find_a_mark_by_its_subjects_segments(memory: Memory) -> None:
    """Issue 25, finding 4: names usually live in the subject."""
    add(memory, "m1", "people.arnold.plans", observation="moving to Lisbon in May")
    query = RecallQuery(about="arnold", layers=("marks",))
    assert [h.mark.id for h in recall(query, memory, T0).marks] == ["m1"]
