"""Loom's acts and finding pages through the real app on a real store and bus (SQLite and
PostgreSQL): the search over every layer, a mark corrected, retracted and forgotten from
its page (confirmed first, sent once however often the form is sent, refused without the
form's token), and the time zone every time is read in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_loom import (
    DAY,
    FIRST_SEEN,
    NOW,
    SCRIPT,
    Loom,
    lentil_mark,
    observation,
    open_loom,
    plant,
)

from daemon.core import signal_types
from daemon.core.records import Mark
from daemon.loom.data import LoomData, SignalFilter
from daemon.store import Store


async def signals_of(loom: Loom, signal_type: str) -> list[str]:
    found = await LoomData(loom.store, "default").signals(SignalFilter(signal_type), 50)
    return [s["id"] for s in found]


async def act(loom: Loom, mark_id: str, name: str, **fields: str) -> dict[str, str]:
    """The act's form on the mark's page, filled in: what its confirmation is asked with."""
    form = await loom.form(f"/loom/marks/{mark_id}", f"/{name}")
    return form | {"by": "ada"} | fields


# -- search --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_one_box_searches_every_layer_and_shows_the_context_block(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        for path in ("/loom/", "/loom/days", "/loom/seeds", "/loom/health", "/loom/week"):
            page = await loom.page(path)
            assert '<form class="everywhere" role="search" method="get"' in page, path
            assert 'action="/loom/search"' in page

        page = await loom.page("/loom/search", q="lentil")
        assert f'href="/loom/marks/{mark_id}">likes lentil soup</a>' in page  # a mark
        assert f'href="/loom/days/{DAY}#L2"' in page  # the daily lines it cites
        assert "food.md" in page  # the substrate file that says lentils
        block = re.search(r'<pre class="context" id="context-block">(.*?)</pre>', page, re.S)
        assert block, "no context block"
        assert block[1].startswith("&lt;&lt;&lt;memory about &#34;lentil&#34;")
        assert "user.food.lunch: likes lentil soup" in block[1]
        assert 'value="lentil"' in page  # the box keeps the words
        # (It said "the best 10 of each" above 20 daily excerpts: the cited lines come too.)
        assert "(the best 10 of each, as recall gives them; the daily excerpts also" in page

        empty = await loom.page("/loom/search")
        assert "Type words or a subject" in empty and "context-block" not in empty
        too_long = await loom.client.get("/loom/search", params={"q": "x" * 1025})
        assert too_long.status_code == 422 and "q: at most 1024 characters" in too_long.text


@pytest.mark.asyncio
async def test_search_shows_markup_as_text(store: Store, tmp_path: Path) -> None:
    async with open_loom(store, tmp_path) as loom:
        await loom.emit(observation("user.test", SCRIPT, FIRST_SEEN, {"note": "n"}))
        page = await loom.page("/loom/search", q="alert")
        assert SCRIPT not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


# -- correct -------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_correction_is_confirmed_then_sent_once_and_shown_in_the_history(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        fields = await act(loom, mark_id, "correct", text="likes pea soup", reason="misheard")
        path = f"/loom/marks/{mark_id}/correct"

        confirm = await loom.client.post(path, data=fields)
        assert (
            confirm.status_code == 200 and 'id="confirm-title">Correct this mark?' in confirm.text
        )
        assert 'id="new-text">likes pea soup<' in confirm.text
        assert await signals_of(loom, signal_types.MARK_CORRECTED) == []  # nothing sent yet

        sent = await loom.client.post(path, data=fields | {"confirmed": "yes"})
        assert sent.status_code == 303
        [signal_id] = await signals_of(loom, signal_types.MARK_CORRECTED)
        new_id = Mark.id_for_signal(signal_id)
        assert sent.headers["location"] == f"/loom/marks/{new_id}?signal={signal_id}"
        page = await loom.page(sent.headers["location"])
        assert "Corrected: sent as signal" in page and "This is the corrected mark" in page
        assert '<h1 class="observation">likes pea soup</h1>' in page
        history = page.split('id="history"')[1]
        assert "corrected by ada" in history and "(misheard)" in history
        assert f'href="/loom/marks/{mark_id}">“likes lentil soup”</a> became' in history
        old = await loom.page(f"/loom/marks/{mark_id}")
        assert 'state-superseded">superseded' in old and "“likes pea soup”" in old
        assert 'id="correct-form"' not in old  # an ended mark is not corrected again

        # The same confirmation sent again is answered by the first: nothing applied twice.
        again = await loom.client.post(path, data=fields | {"confirmed": "yes"})
        assert again.status_code == 303 and again.headers["location"] == sent.headers["location"]
        assert len(await signals_of(loom, signal_types.MARK_CORRECTED)) == 1
        chain = loom.store.read_sync(lambda tx: tx.marks.chain(mark_id))
        assert [m.observation for m in chain] == ["likes lentil soup", "likes pea soup"]

        # A new form for the ended mark is refused at its confirmation, naming why.
        refused = await loom.client.post(path, data=fields | {"idempotency_key": "other"})
        assert refused.status_code == 409 and "is already superseded" in refused.text


@pytest.mark.asyncio
async def test_a_correction_with_bad_input_is_refused_naming_the_field(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        path = f"/loom/marks/{mark_id}/correct"
        fields = await act(loom, mark_id, "correct", text="likes pea soup", reason="misheard")
        cases = {
            "reason: must not be empty": fields | {"reason": " "},
            "text: is what the mark already says": fields | {"text": "likes lentil soup"},
            "idempotency_key: must not be empty": fields | {"idempotency_key": ""},
            "by: at most 128 characters": fields | {"by": "a" * 129},
        }
        for message, data in cases.items():
            for confirmed in ({}, {"confirmed": "yes"}):
                response = await loom.client.post(path, data=data | confirmed)
                assert response.status_code == 422 and message in response.text, message
        unknown = await loom.client.post(f"/loom/marks/{mark_id}/rename", data=fields)
        assert unknown.status_code == 404
        missing = await loom.client.post("/loom/marks/mk_nope/correct", data=fields)
        assert missing.status_code == 404 and "there is no mark mk_nope" in missing.text
        assert await signals_of(loom, signal_types.MARK_CORRECTED) == []


@pytest.mark.asyncio
async def test_every_act_refuses_a_post_without_the_token_or_from_elsewhere(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        seed_id = await plant(loom, "sig-plant-1", "user.food", [])
        fields = await act(loom, mark_id, "forget", reason="private", confirmed="yes")
        posts = {
            f"/loom/marks/{mark_id}/correct": fields | {"text": "likes pea soup"},
            f"/loom/marks/{mark_id}/retract": fields,
            f"/loom/marks/{mark_id}/forget": fields,
            f"/loom/seeds/{seed_id}/review": fields | {"decision": "accepted", "reviewer": "a"},
            f"/loom/seeds/{seed_id}/undo": fields | {"reviewer": "a"},
            "/loom/signals/nope/discard": fields,
            "/loom/signals/nope/retry": fields,
        }
        for path, data in posts.items():
            tokenless = {k: v for k, v in data.items() if k != "csrf"}
            assert (await loom.client.post(path, data=tokenless)).status_code == 403, path
            guessed = await loom.client.post(path, data=data | {"csrf": "guessed"})
            assert guessed.status_code == 403, path
            foreign = await loom.client.post(
                path, data=data, headers={"origin": "http://evil.example"}
            )
            assert foreign.status_code == 403 and "another origin" in foreign.text, path
            cross = await loom.client.post(
                path, data=data, headers={"sec-fetch-site": "cross-site"}
            )
            assert cross.status_code == 403, path
        for kind in (signal_types.MARK_CORRECTED, signal_types.MARK_RETRACTED, signal_types.FORGET):
            assert await signals_of(loom, kind) == []
        mark = loom.store.read_sync(lambda tx: tx.marks.get(mark_id))
        assert mark is not None and mark.state == "active"


# -- retract -------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_retraction_is_confirmed_then_ends_the_mark(store: Store, tmp_path: Path) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        fields = await act(loom, mark_id, "retract", reason="a joke")
        path = f"/loom/marks/{mark_id}/retract"
        confirm = await loom.client.post(path, data=fields)
        assert "Retract this mark?" in confirm.text and "Yes, retract it" in confirm.text
        assert 'href="/loom/marks/' + mark_id + '" id="cancel"' in confirm.text

        sent = await loom.client.post(path, data=fields | {"confirmed": "yes"})
        page = await loom.page(sent.headers["location"])
        assert "Retracted: sent as signal" in page
        assert 'state-retracted">retracted</span>' in page and "a joke" in page
        assert 'id="retract-form"' not in page and 'id="forget-form"' in page
        assert 'class="history-retracted"' in page
        listing = await loom.page("/loom/marks", state="retracted")
        assert "likes lentil soup" in listing and "<meter" not in listing


# -- forget --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_forget_leaves_a_tombstone_and_lists_the_live_lines_left(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        fields = await act(loom, mark_id, "correct", text="likes lentil stew", reason="stew")
        path = f"/loom/marks/{mark_id}/correct"
        corrected = await loom.client.post(path, data=fields | {"confirmed": "yes"})
        new_page = corrected.headers["location"].split("?")[0]

        fields = await act(loom, mark_id, "forget", reason="private")
        confirm = await loom.client.post(f"/loom/marks/{mark_id}/forget", data=fields)
        assert "This cannot be undone" in confirm.text and "2 marks is erased" in confirm.text
        assert "likes lentil stew" in confirm.text  # the chain it takes with it, named
        sent = await loom.client.post(
            f"/loom/marks/{mark_id}/forget", data=fields | {"confirmed": "yes"}
        )
        assert sent.status_code == 303
        page = await loom.page(sent.headers["location"])
        assert "Forgotten: sent as signal" in page and 'id="tombstone"' in page
        # Line 2 of the live day still names its subject's last segment ("lunch"): its
        # place is listed, not its text.
        assert f'href="/loom/days/{DAY}#L2"><code>' in page and f"{DAY}.md:2</code>" in page
        assert f"{DAY}.md:3</code>" not in page
        for shown in (page, await loom.page(new_page), await loom.page("/loom/marks")):
            assert "likes lentil" not in shown.split("<main>")[1].split('id="act-outcome"')[-1]
            assert 'id="strength-plot"' not in shown and "<meter" not in shown
            assert 'class="tombstone"' in shown or 'id="tombstone"' in shown
        assert 'id="forget-form"' not in page and 'id="correct-form"' not in page

        again = await loom.client.post(
            f"/loom/marks/{mark_id}/forget", data=fields | {"confirmed": "yes"}
        )
        assert again.status_code == 303
        assert len(await signals_of(loom, signal_types.FORGET)) == 1
        refused = await loom.client.post(
            f"/loom/marks/{mark_id}/forget", data=fields | {"idempotency_key": "other"}
        )
        assert refused.status_code == 409 and "already forgotten" in refused.text


@pytest.mark.asyncio
async def test_a_forget_whose_reason_repeats_the_text_is_refused(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        fields = await act(loom, mark_id, "forget", reason="likes lentil soup", confirmed="yes")
        refused = await loom.client.post(f"/loom/marks/{mark_id}/forget", data=fields)
        assert refused.status_code == 422
        assert "reason: must not repeat what is forgotten" in refused.text
        mark = loom.store.read_sync(lambda tx: tx.marks.get(mark_id))
        assert mark is not None and mark.state == "active"


@pytest.mark.asyncio
async def test_an_act_on_another_marks_signal_is_not_reported_as_this_ones(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        other = await loom.emit(observation("user.sleep", "sleeps well", NOW, {"note": "n"}))
        other_id = Mark.id_for_signal(other)
        fields = await act(loom, other_id, "retract", reason="no", confirmed="yes")
        sent = await loom.client.post(f"/loom/marks/{other_id}/retract", data=fields)
        signal_id = sent.headers["location"].split("signal=")[1]
        page = await loom.page(f"/loom/marks/{mark_id}", signal=signal_id, left=f"{DAY}:2")
        assert 'id="act-outcome"' not in page


# -- time -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_times_are_read_in_the_configured_zone_labelled_and_json_stays_utc(
    store: Store, tmp_path: Path
) -> None:
    async with open_loom(store, tmp_path) as loom:
        mark_id = await lentil_mark(loom)
        page = await loom.page(f"/loom/marks/{mark_id}")
        # FIRST_SEEN is 09:00 UTC: 11:00 in Berlin's summer time, and it says so.
        assert "2026-05-01 11:00 CEST by agent-chat" in page
        assert "times in Europe/Berlin (CEST)" in page
        assert re.search(r'data-start="2026-05-01T09:00:00Z"', page)
        stamps = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d(?! [A-Z]{3,4}\b)", page)
        assert stamps == [], f"unlabelled times: {stamps}"
        answer = (await loom.client.get(f"/v1/marks/{mark_id}")).json()
        assert answer["mark"]["first_observed_at"] == "2026-05-01T09:00:00Z"


@pytest.mark.asyncio
async def test_the_plot_labels_now_apart_from_the_dates(store: Store, tmp_path: Path) -> None:
    async with open_loom(store, tmp_path) as loom:
        await loom.emit(observation("user.new", "seen just now", NOW, {"note": "n"}))
        page = await loom.page(f"/loom/marks/{Mark.id_for_signal(await newest(loom))}")
        labels = re.findall(
            r'<text class="axis time-label" x="([0-9.]+)" y="([0-9.]+)" text-anchor="(\w+)">'
            r"([^<]+)</text>",
            page,
        )
        assert [text for *_, text in labels] == [
            "2026-05-20 14:00 CEST",
            "now",
            "2026-07-19 14:00 CEST",
        ]
        (_, start_y, _, _), (_, now_y, anchor, _), _ = labels
        assert now_y != start_y and anchor == "start"  # above, beside its line: no overprint


async def newest(loom: Loom) -> str:
    found = await LoomData(loom.store, "default").signals(SignalFilter(), 1)
    return str(found[0]["id"])
