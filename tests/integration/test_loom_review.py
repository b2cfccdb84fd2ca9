"""Loom's review pages through the real app on a real store and bus (SQLite and
PostgreSQL): a seed's target file and the diff of its change (never written), the undo of
a review within ``seeds.undo_hours`` and not after, dead deliveries listed with their
error and discarded from the list."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_loom import FIRST_SEEN, NOW, Loom, dead_review, lentil_mark, open_loom, plant

from daemon.core import signal_types
from daemon.core.records import derived_id
from daemon.loom.data import LoomData, SignalFilter
from daemon.store import Store


class MovingClock:
    """A clock the test moves on, never sleeping for it."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def plant_for(loom: Loom, signal_id: str, target: str, change: str = "Add: tea") -> str:
    await loom.emit(
        {
            "id": signal_id,
            "type": "memory.seed_planted",
            "source_id": "gardener",
            "emitted_at": FIRST_SEEN.isoformat(),
            "payload": {"subject": "user.drink", "proposed_change": change, "target_file": target},
        }
    )
    return derived_id("sd", signal_id)


def pre(page: str, element_id: str) -> str:
    found = re.search(rf'<pre class="\w+" id="{element_id}">(.*?)</pre>', page, re.S)
    assert found, f"no {element_id}"
    return re.sub(r"<[^>]+>", "", found[1])


@pytest.mark.asyncio
async def test_a_seed_shows_its_target_file_and_the_diff_of_its_change(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        target = tmp_path / "long-term" / "food.md"
        before = (target.read_bytes(), target.stat().st_mtime_ns)
        seed_id = await plant(loom, "sig-plant-1", "user.food", [])
        page = await loom.page(f"/loom/seeds/{seed_id}")
        assert f"<code>{target}</code>" in page and 'id="target-missing"' not in page
        assert pre(page, "target-text").splitlines() == ["   1 # Food", "   2 lentils"]
        assert pre(page, "seed-diff").splitlines() == [
            "--- a/long-term/food.md",
            "+++ b/long-term/food.md",
            "@@ -1,2 +1,3 @@",
            " # Food",
            " lentils",
            "+Add: user.food",
        ]
        assert '<span class="diff-added">+Add: user.food</span>' in page

        fields = await loom.form(f"/loom/seeds/{seed_id}", "/review")
        accepted = await loom.client.post(
            f"/loom/seeds/{seed_id}/review", data=fields | {"decision": "accepted", "reviewer": "a"}
        )
        assert accepted.status_code == 303
        assert (target.read_bytes(), target.stat().st_mtime_ns) == before  # Loom never writes


@pytest.mark.asyncio
async def test_a_seed_says_clearly_when_its_target_file_does_not_exist(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        outside = tmp_path / "private.md"  # exists, but is no substrate file: never shown
        outside.write_text("a secret\n")
        for number, target in enumerate(("long-term/drinks.md", str(outside), "food.md.md")):
            seed_id = await plant_for(loom, f"sig-plant-{number}", target)
            page = await loom.page(f"/loom/seeds/{seed_id}")
            assert 'id="target-missing"' in page and f"substrate file <code>{target}</code>" in page
            assert 'id="target-text"' not in page and "a secret" not in page
            assert pre(page, "seed-diff").splitlines() == [
                "--- /dev/null",
                f"+++ b/{target}",
                "@@ -0,0 +1 @@",
                "+Add: tea",
            ]
        assert not (tmp_path / "long-term" / "drinks.md").exists()


@pytest.mark.asyncio
async def test_a_review_is_undone_once_within_the_window_and_not_after(
    store: Store, tmp_path: Path
) -> None:
    clock = MovingClock(NOW)
    async with open_loom(store, tmp_path, clock) as loom:
        mark_id = await lentil_mark(loom)
        seed_id = await plant(loom, "sig-plant-1", "user.food", [mark_id])
        await review(loom, seed_id, "accepted")
        page = await loom.page(f"/loom/seeds/{seed_id}")
        assert "Until 2026-05-21 14:00 CEST (24 hours after the review)" in page
        assert "the marks it is based on no longer promoted" in page

        fields = await loom.form(f"/loom/seeds/{seed_id}", "/undo")
        undone = await loom.client.post(
            f"/loom/seeds/{seed_id}/undo", data=fields | {"reviewer": "ada"}
        )
        assert undone.status_code == 303
        after = await loom.page(undone.headers["location"])
        assert "Undo sent as signal" in after and 'now <span class="state state-pending">' in after
        mark = loom.store.read_sync(lambda tx: tx.marks.get(mark_id))
        assert mark is not None and mark.state == "active"
        again = await loom.client.post(
            f"/loom/seeds/{seed_id}/undo", data=fields | {"reviewer": "ada"}
        )
        assert again.headers["location"] == undone.headers["location"]
        assert len(await signals(loom, signal_types.SEED_REVIEW_UNDONE)) == 1

        await review(loom, seed_id, "rejected")
        clock.now = NOW + timedelta(hours=25)
        late = await loom.page(f"/loom/seeds/{seed_id}")
        assert 'id="undo-closed"' in late and 'id="undo"' not in late
        fields["idempotency_key"] = "late"
        refused = await loom.client.post(
            f"/loom/seeds/{seed_id}/undo", data=fields | {"reviewer": "ada"}
        )
        assert refused.status_code == 409 and "can no longer be undone" in refused.text
        assert len(await signals(loom, signal_types.SEED_REVIEW_UNDONE)) == 1


async def review(loom: Loom, seed_id: str, decision: str) -> None:
    fields = await loom.form(f"/loom/seeds/{seed_id}", "/review")
    response = await loom.client.post(
        f"/loom/seeds/{seed_id}/review", data=fields | {"decision": decision, "reviewer": "ada"}
    )
    assert response.status_code == 303, response.text


async def signals(loom: Loom, signal_type: str, status: str = "") -> list[dict[str, Any]]:
    return await LoomData(loom.store, "default").signals(SignalFilter(signal_type, status), 50)


@pytest.mark.asyncio
async def test_dead_deliveries_are_listed_with_their_error_and_discarded_from_the_list(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        dead = await dead_review(loom, "sd_never")
        listing = await loom.page("/loom/signals", status="dead")
        assert re.search(r'<div class="error">[^<]*no seed sd_never', listing)
        fields = await loom.form("/loom/signals?status=dead", f"/{dead}/discard")
        assert fields["by"]  # the person running the daemon, as the CLI's default
        response = await loom.client.post(f"/loom/signals/{dead}/discard", data=fields)
        assert response.status_code == 303
        page = await loom.page(response.headers["location"])
        assert 'id="discard-outcome"' in page
        assert await signals(loom, "", "dead") == []
        assert "Discard</button>" not in await loom.page("/loom/signals")
