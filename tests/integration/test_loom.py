"""Loom's pages, served by the real app on a real store and bus (SQLite and PostgreSQL),
through httpx's ASGI transport. The clock is injected: every strength is checked against
the formula at a known instant."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import httpx
import pytest

from daemon.bus import RetryPolicy, SignalBus
from daemon.composition import build_app
from daemon.core.clock import Clock
from daemon.core.records import derived_id
from daemon.core.strength import current_strength
from daemon.files.compost import Compost
from daemon.files.daily import DailyLog
from daemon.files.substrate import Substrate
from daemon.loom.data import LoomData, SignalFilter
from daemon.services.recall import Memory
from daemon.services.running import Services
from daemon.store import Store
from receptors.daily_note import DailyNoteReceptor
from receptors.discards import DiscardReceptor
from receptors.governance import GovernanceReceptor
from receptors.observation import ObservationReceptor
from receptors.seeds import SeedReceptor

NOW = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)
DAY = date(2026, 5, 1)
FIRST_SEEN = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
REINFORCED = datetime(2026, 5, 10, 9, 0, tzinfo=UTC)
HALF_LIFE_DAYS = 14.0
DAY_LINES = ["# May day", "had lentil soup for lunch", "said lentils are the best", "walked"]
SCRIPT = "<script>alert(1)</script>"


@dataclass
class Loom:
    client: httpx.AsyncClient
    bus: SignalBus
    store: Store
    daily: DailyLog
    services: Services

    async def emit(self, signal: dict[str, Any]) -> str:
        stored = await self.bus.emit_raw(signal)
        with anyio.fail_after(10):
            await self.bus.settled(stored.id)
        return stored.id

    async def page(self, path: str, **params: Any) -> str:
        response = await self.client.get(path, params=params or None)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/html")
        return response.text

    async def csrf(self, path: str) -> str:
        return (await self.form(path))["csrf"]

    async def form(self, path: str, action: str = "") -> dict[str, str]:
        """The hidden fields of the page's first form posting to an action ending in
        ``action``: its token and its idempotency key."""
        page = await self.page(path)
        forms = re.findall(r'<form[^>]*action="([^"]*)"[^>]*>(.*?)</form>', page, re.S)
        for target, body in forms:
            if target.endswith(action) and 'name="csrf"' in body:
                return dict(
                    re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', body)
                )
        raise AssertionError(f"no form posting to …{action} on {path}")


def observation(
    subject: str, text: str, at: datetime, evidence: dict[str, Any], **fields: Any
) -> dict[str, Any]:
    return {
        "type": "memory.observation",
        "source_id": fields.pop("source_id", "agent-chat"),
        "emitted_at": at.isoformat(),
        "intensity": 0.6,
        "decay_rate": HALF_LIFE_DAYS * 86_400,
        "payload": {"subject": subject, "observation": text, "evidence": evidence},
        **fields,
    }


@asynccontextmanager
async def open_loom(
    store: Store, tmp_path: Path, clock: Clock = lambda: NOW
) -> AsyncIterator[Loom]:
    """The app on a running bus (entered and left in the test's own task, as anyio needs),
    its time told by ``clock``."""
    zone = ZoneInfo("Europe/Berlin")
    (tmp_path / "long-term").mkdir()
    (tmp_path / "long-term" / "food.md").write_text("# Food\nlentils\n")
    daily = DailyLog(tmp_path / "daily")
    for line in DAY_LINES:
        daily.append(DAY, line)
    memory = Memory(
        store=store,
        substrate=Substrate([tmp_path / "long-term"]),
        daily=daily,
        compost=Compost(tmp_path / "compost"),
        workspace="default",
        zone=zone,
    )
    receptors = [
        ObservationReceptor(),
        SeedReceptor(),
        DailyNoteReceptor(daily, zone=zone),
        DiscardReceptor(),
        GovernanceReceptor(store, daily, memory.mark_search),
    ]
    retry = RetryPolicy(max_attempts=1, base_delay=0.01, max_delay=0.05)
    async with SignalBus(store, receptors, retry=retry, clock=clock) as bus:
        services = Services(
            bus=bus, memory=memory, clock=clock, next_fires=lambda: {"nightly": NOW}
        )
        transport = httpx.ASGITransport(app=build_app(services, 1 << 20))
        async with httpx.AsyncClient(transport=transport, base_url="http://cambium") as client:
            yield Loom(client, bus, store, daily, services)


async def lentil_mark(loom: Loom) -> str:
    """A mark citing lines 2-3 of DAY, reinforced once; its id."""
    evidence = {"daily_file": f"{DAY}.md", "line_range": [2, 3]}
    await loom.emit(observation("user.food.lunch", "likes lentil soup", FIRST_SEEN, evidence))
    await loom.emit(
        observation("user.food.lunch", "likes lentil soup", REINFORCED, {"note": "again"})
    )
    page = await loom.page("/loom/marks", q="lentil")
    [mark_id] = re.findall(r'href="/loom/marks/([^"]+)"', page)
    return mark_id


async def dead_review(loom: Loom, seed_id: str) -> str:
    """A review of a seed not planted (yet): its delivery dies at once; its id."""
    return await loom.emit(
        {
            "type": "memory.seed_reviewed",
            "source_id": "impatient",
            "payload": {"seed_id": seed_id, "decision": "rejected", "reviewer": "ada"},
        }
    )


def expected_strength(at: datetime) -> float:
    boosts = [(REINFORCED, 0.2)] if at >= REINFORCED else []
    return current_strength(0.6, HALF_LIFE_DAYS, FIRST_SEEN, boosts, at)


def plotted(page: str) -> list[tuple[datetime, float]]:
    """The curve of the strength plot, read back into (instant, strength) through the
    scale the SVG declares."""
    svg = re.search(r'<svg id="strength-plot"(.*?)>', page, re.S)
    assert svg, "no strength plot"
    attrs = dict(re.findall(r'data-([a-z0-9]+)="([^"]+)"', svg[1]))
    start = datetime.fromisoformat(attrs["start"])
    end = datetime.fromisoformat(attrs["end"])
    x0, x1, y0, y1 = (float(attrs[k]) for k in ("x0", "x1", "y0", "y1"))
    points = re.search(r'<polyline class="curve" points="([^"]+)"', page)
    assert points
    curve = []
    for pair in points[1].split():
        x, y = (float(v) for v in pair.split(","))
        curve.append((start + (end - start) * ((x - x0) / (x1 - x0)), (y - y0) / (y1 - y0)))
    return curve


# -- marks ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_search_finds_marks_by_text_prefix_state_and_observer(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        await lentil_mark(loom)
        await loom.emit(
            observation(
                "user.sleep", "goes to bed at 23:00", FIRST_SEEN, {"note": "n"}, source_id="x"
            )
        )
        everything = await loom.page("/loom/")
        assert "likes lentil soup" in everything and "goes to bed at 23:00" in everything
        assert "2 marks" in everything

        by_text = await loom.page("/loom/marks", q="LENTIL")
        assert "likes lentil soup" in by_text and "goes to bed" not in by_text
        by_prefix = await loom.page("/loom/marks", subject="user.sl")
        assert "goes to bed" in by_prefix and "lentil" not in by_prefix.split("<table")[1]
        by_observer = await loom.page("/loom/marks", observed_by="x")
        assert "goes to bed" in by_observer and "1 mark," in by_observer
        withered = await loom.page("/loom/marks", state="withered")
        assert "No mark matches." in withered
        # A literal % is text, not a wildcard.
        assert "No mark matches." in await loom.page("/loom/marks", q="%")


@pytest.mark.asyncio
async def test_a_bad_filter_is_refused_naming_the_field(store: Store, tmp_path: Path) -> None:
    async with open_loom(store, tmp_path) as loom:
        response = await loom.client.get("/loom/marks", params={"state": "sleeping"})
        assert response.status_code == 422
        assert "state: must be one of active, withered, promoted" in response.text
        response = await loom.client.get("/loom/signals", params={"status": "lost"})
        assert response.status_code == 422 and "status: must be one of" in response.text


@pytest.mark.asyncio
async def test_mark_page_plots_strength_by_the_formula_with_reinforcements(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        page = await loom.page(f"/loom/marks/{mark_id}")

        curve = plotted(page)
        assert curve[0][0] == pytest.approx(FIRST_SEEN, abs=timedelta(minutes=1))
        assert curve[-1][0] == pytest.approx(NOW + timedelta(days=60), abs=timedelta(minutes=1))
        past = next(p for p in curve if p[0] > FIRST_SEEN + timedelta(days=5))
        future = next(p for p in curve if p[0] > NOW + timedelta(days=30))
        assert past[0] < NOW < future[0]
        for at, value in (curve[0], past, future):
            assert value == pytest.approx(expected_strength(at), abs=0.005)
        # The jump at the reinforcement is drawn: 0.2 higher at the instant than just before.
        before, after = (v for at, v in curve if abs(at - REINFORCED) < timedelta(minutes=1))
        assert after - before == pytest.approx(0.2, abs=0.005)
        assert page.count('<circle class="reinforcement"') == 1
        assert f'id="strength-now">{expected_strength(NOW):.3f}<' in page


@pytest.mark.asyncio
async def test_mark_page_quotes_its_evidence_lines_and_links_the_day(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        page = await loom.page(f"/loom/marks/{mark_id}")
        assert f'href="/loom/days/{DAY}#L2"' in page
        assert (
            "had lentil soup for lunch</div>" in page and "said lentils are the best</div>" in page
        )
        assert "walked</div>" not in page
        assert "Note: again" in page  # the reinforcement's own evidence, in the history
        missing = await loom.client.get("/loom/marks/mk_nope")
        assert missing.status_code == 404 and "there is no mark mk_nope" in missing.text


@pytest.mark.asyncio
async def test_markup_in_a_mark_is_shown_as_text(store: Store, tmp_path: Path) -> None:
    async with open_loom(store, tmp_path) as loom:
        await loom.emit(observation("user.test", SCRIPT, FIRST_SEEN, {"note": SCRIPT}))
        listing = await loom.page("/loom/marks")
        assert SCRIPT not in listing
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in listing
        [mark_id] = re.findall(r'href="/loom/marks/([^"]+)"', listing)
        page = await loom.page(f"/loom/marks/{mark_id}")
        assert SCRIPT not in page and page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 2


# -- days ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_day_shows_its_lines_and_the_marks_citing_them(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        days = await loom.page("/loom/days")
        assert f'href="/loom/days/{DAY}"' in days and "live" in days
        page = await loom.page(f"/loom/days/{DAY}")
        rows = re.findall(r'<tr id="L(\d+)"( class="cited")?>', page)
        assert rows == [("1", ""), ("2", ' class="cited"'), ("3", ' class="cited"'), ("4", "")]
        assert page.count(f'href="/loom/marks/{mark_id}"') == 2

        loom.daily.archive(DAY)
        archived = await loom.page(f"/loom/days/{DAY}")
        assert "Archived file" in archived and 'id="A2" class="cited"' in archived

        bad = await loom.client.get("/loom/days/2026-02-30")
        assert bad.status_code == 422 and "day: invalid day" in bad.text
        assert (await loom.client.get("/loom/days/../../etc/passwd")).status_code == 404
        none = await loom.client.get("/loom/days/2020-01-01")
        assert none.status_code == 404 and "no daily file for 2020-01-01" in none.text


# -- seeds ---------------------------------------------------------------------------------


async def plant(
    loom: Loom, signal_id: str, subject: str, based_on: list[str], at: datetime = FIRST_SEEN
) -> str:
    await loom.emit(
        {
            "id": signal_id,
            "type": "memory.seed_planted",
            "source_id": "gardener",
            "emitted_at": at.isoformat(),
            "payload": {
                "subject": subject,
                "proposed_change": f"Add: {subject}",
                "target_file": "long-term/food.md",
                "based_on_marks": based_on,
            },
        }
    )
    return derived_id("sd", signal_id)


@pytest.mark.asyncio
async def test_accepting_a_seed_sends_a_signal_and_shows_its_outcome(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        first = await plant(loom, "sig-plant-1", "user.food", [mark_id])
        second = await plant(loom, "sig-plant-2", "user.drink", [])
        fields = await loom.form("/loom/seeds", f"{first}/review")

        response = await loom.client.post(
            f"/loom/seeds/{first}/review",
            data=fields | {"decision": "accepted", "reviewer": "ada"},
            headers={"origin": "http://cambium"},
        )
        assert response.status_code == 303
        page = await loom.page(response.headers["location"])
        signal_id = re.search(r'<code id="review-signal">([^<]+)</code>', page)
        assert signal_id
        assert 'seeds <span class="status status-delivered">delivered</span>' in page
        assert 'The seed is now <span class="state state-accepted">accepted</span>' in page
        seed = loom.store.read_sync(lambda tx: tx.seeds.get(first, "default"))
        assert seed is not None and seed.state == "accepted" and seed.reviewed_by == "ada"
        signal = await loom.page(f"/loom/signals/{signal_id[1]}")
        assert "memory.seed_reviewed" in signal and "loom" in signal
        mark = await loom.page(f"/loom/marks/{mark_id}")
        assert 'state-promoted">promoted' in mark and "state-accepted" in mark

        # Pending seeds are listed first; the reviewed one has no form any more.
        listing = await loom.page("/loom/seeds")
        assert listing.index("user.drink") < listing.index("user.food")
        assert listing.count('<form class="review"') == 1
        # The same form sent again is answered by its first send; another form is refused.
        repeat = await loom.client.post(
            f"/loom/seeds/{first}/review", data=fields | {"decision": "accepted", "reviewer": "ada"}
        )
        assert repeat.headers["location"] == response.headers["location"]
        other_form = await loom.form("/loom/seeds", f"{second}/review")
        again = await loom.client.post(
            f"/loom/seeds/{first}/review",
            data=other_form | {"decision": "rejected", "reviewer": "ada"},
        )
        assert again.status_code == 409 and "is already accepted" in again.text
        # Another seed's page does not claim that review as its own.
        other = await loom.page(f"/loom/seeds/{second}", signal=signal_id[1])
        assert "review-outcome" not in other and "user.drink" in other


@pytest.mark.asyncio
async def test_a_review_from_loom_keeps_the_apis_rules_and_stores_nothing_refused(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        withered = await plant(loom, "sig-plant-old", "user.food", [], at=NOW - timedelta(days=60))
        form = await loom.form("/loom/seeds") | {"decision": "accepted", "reviewer": "ada"}
        refused = await loom.client.post(f"/loom/seeds/{withered}/review", data=form)
        assert refused.status_code == 409 and "withered" in refused.text
        missing = await loom.client.post("/loom/seeds/sd_nope/review", data=form)
        assert missing.status_code == 404 and "no seed sd_nope" in missing.text
        reviews = SignalFilter(signal_type="memory.seed_reviewed")
        assert await LoomData(loom.store, "default").signals(reviews, 10) == []


@pytest.mark.asyncio
async def test_review_forms_refuse_cross_site_and_tokenless_posts(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        seed_id = await plant(loom, "sig-plant-1", "user.food", [])
        token = await loom.csrf(f"/loom/seeds/{seed_id}")
        review = {"decision": "accepted", "reviewer": "ada"}
        path = f"/loom/seeds/{seed_id}/review"

        refused = [
            await loom.client.post(path, data=review),
            await loom.client.post(path, data=review | {"csrf": "guessed"}),
            await loom.client.post(
                path, data=review | {"csrf": token}, headers={"origin": "http://evil.example"}
            ),
            await loom.client.post(
                path, data=review | {"csrf": token}, headers={"sec-fetch-site": "cross-site"}
            ),
        ]
        assert [r.status_code for r in refused] == [403, 403, 403, 403]
        assert "token is missing or stale" in refused[0].text
        assert "from another origin" in refused[2].text
        bad = await loom.client.post(path, data={"csrf": token, "decision": "accepted"})
        assert bad.status_code == 422 and "reviewer: must not be empty" in bad.text
        seed = loom.store.read_sync(lambda tx: tx.seeds.get(seed_id, "default"))
        assert seed is not None and seed.state == "pending"
        assert (await loom.client.get("/loom/seeds/sd_nope")).status_code == 404


# -- signals -------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_signals_filter_and_a_dead_one_is_delivered_by_a_retry(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        await lentil_mark(loom)
        seed_id = derived_id("sd", "sig-plant-late")
        dead = await dead_review(loom, seed_id)
        listing = await loom.page("/loom/signals", status="dead")
        assert f'href="/loom/signals/{dead}"' in listing and "1 signal," in listing
        by_type = await loom.page("/loom/signals", type="memory.observation")
        assert "2 signals," in by_type and dead not in by_type
        by_source = await loom.page("/loom/signals", source="impatient")
        assert "1 signal," in by_source and dead in by_source

        page = await loom.page(f"/loom/signals/{dead}")
        assert f"no seed {seed_id}" in page and 'id="retry"' in page
        token = await loom.csrf(f"/loom/signals/{dead}")
        assert (await loom.client.post(f"/loom/signals/{dead}/retry")).status_code == 403

        await plant(loom, "sig-plant-late", "user.food", [])  # the cause, fixed
        response = await loom.client.post(f"/loom/signals/{dead}/retry", data={"csrf": token})
        assert response.status_code == 303
        after = await loom.page(response.headers["location"])
        assert "Retried the dead deliveries to seeds" in after
        assert 'seeds <span class="status status-delivered">delivered</span>' in after
        assert 'id="retry"' not in after
        seed = loom.store.read_sync(lambda tx: tx.seeds.get(seed_id, "default"))
        assert seed is not None and seed.state == "rejected"
        again = await loom.client.post(f"/loom/signals/{dead}/retry", data={"csrf": token})
        assert again.status_code == 409
        assert (await loom.client.get("/loom/signals/nope")).status_code == 404


@pytest.mark.asyncio
async def test_a_dead_delivery_is_discarded_by_a_button_and_stops_counting(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        dead = await dead_review(loom, "sd_never")
        assert "1 dead</a>" in await loom.page("/loom/health")
        page = await loom.page(f"/loom/signals/{dead}")
        assert 'id="discard"' in page
        fields = await loom.form(f"/loom/signals/{dead}", "/discard")
        path = f"/loom/signals/{dead}/discard"
        assert (await loom.client.post(path, data={"by": "ada"})).status_code == 403
        response = await loom.client.post(path, data=fields | {"by": "ada"})
        assert response.status_code == 303
        after = await loom.page(response.headers["location"])
        assert 'id="discard-outcome"' in after and 'id="discard"' not in after
        assert '<span class="status status-discarded">discarded</span> by ada' in after
        assert "0 dead</a>" in await loom.page("/loom/health")
        assert dead in await loom.page("/loom/signals", status="discarded")
        again = await loom.client.post(path, data=fields | {"by": "ada"})
        assert again.status_code == 303, "a repeat is answered with the first discard"
        assert again.headers["location"] == response.headers["location"]
        nothing = await loom.client.post(
            "/loom/signals/nope/discard", data=fields | {"idempotency_key": "k2", "by": "ada"}
        )
        assert nothing.status_code == 409


# -- health and the page shell -------------------------------------------------------------


@pytest.mark.asyncio
async def test_health_shows_receptors_counts_rhythms_and_substrate(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        page = await loom.page("/loom/health")
        binds = "memory.seed_planted, memory.seed_review_undone, memory.seed_reviewed"
        assert "observation" in page and binds in page
        assert "0 pending" in page and "0 dead" in page
        assert "nightly" in page and "2026-05-20 14:00" in page  # NOW, in Europe/Berlin
        assert "food.md" in page


@pytest.mark.asyncio
async def test_pages_load_nothing_from_outside_and_forbid_it(store: Store, tmp_path: Path) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        for path in ("/loom/", f"/loom/marks/{mark_id}", "/loom/days", "/loom/seeds"):
            response = await loom.client.get(path)
            assert "default-src 'none'" in response.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
            external = re.findall(r'(?:src|href|action)="(?!/|#)([^"]*)"', response.text)
            assert external == [], f"{path} refers outside: {external}"
        css = await loom.client.get("/loom/static/loom.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert "url(" not in css.text and "@import" not in css.text
        assert (await loom.client.get("/loom", follow_redirects=True)).url.path == "/loom/"


@pytest.mark.asyncio
async def test_search_ranks_every_match_and_says_when_it_shows_fewer(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("daemon.loom.routes.SEARCH_LIMIT", 2)
    async with open_loom(store, tmp_path) as loom:
        # The strongest is the oldest: ranking is by strength now, over every match.
        for days_ago, intensity in ((9, 1.0), (1, 0.3), (5, 0.9)):
            at = NOW - timedelta(days=days_ago)
            signal = observation(f"user.n{intensity}", f"strength {intensity}", at, {"note": "n"})
            await loom.emit(signal | {"intensity": intensity})
        page = await loom.page("/loom/marks")
        assert "3 marks; the strongest 2 shown" in page
        shown = re.findall(r">strength ([0-9.]+)</a>", page)
        assert shown == ["0.9", "1.0"]  # 0.9 * 2^(-5/14) > 1.0 * 2^(-9/14)
