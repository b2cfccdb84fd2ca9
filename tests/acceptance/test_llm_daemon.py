"""End to end: `cambium run` with `extractor = "openai"`, a scripted chat-completions server
on a loopback port, and the real CLI: a note becomes an inferred mark, and recall summarises
it citing the mark. The key comes from an environment variable."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from chat_server import ChatServer, chat_server, facts

from daemon.testing import DaemonHome, running

KEY = "test-key-0123456789abcdef"
# Yesterday in the daemon's zone: a mark is as old as its evidence, and recall leaves out
# what has withered, so the day noted must be recent.
DAY = (datetime.now(ZoneInfo("Europe/Berlin")).date() - timedelta(days=1)).isoformat()


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as started:
        yield started


def llm_home(tmp_path: Path, server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> DaemonHome:
    monkeypatch.setenv("CAMBIUM_TEST_LLM_KEY", KEY)
    return DaemonHome(
        tmp_path,
        extra_config=f"""
[consolidation]
extractor = "openai"
[llm]
base_url = "{server.url}"
model = "test-model"
api_key_env = "CAMBIUM_TEST_LLM_KEY"
""",
    )


def test_a_note_becomes_an_inferred_mark_and_recall_summarises_it_citing_the_mark(
    tmp_path: Path, server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = llm_home(tmp_path, server, monkeypatch)
    server.say(facts(("people.arnold.home", "Arnold is moving to Lisbon in May.", 1, 1)))
    with running(home):
        note = "Lunch with Arnold, he's moving to Lisbon in May. wifi password: hunter22"
        assert home.cli("memory", "note", note, "--date", DAY).returncode == 0
        consolidated = home.cli("memory", "consolidate", "--date", DAY)
        assert consolidated.returncode == 0, consolidated.stderr + home.log_text()

        recalled = home.get("/v1/recall", about="people.arnold", layers="marks").json()
        (mark,) = recalled["marks"]
        assert mark["provenance"] == "inferred"
        assert mark["evidence"]["daily_file"] == f"{DAY}.md"
        assert recalled["summary"] is None, "no summary unless asked"

        server.say(json.dumps({"answer": f"Arnold is moving to Lisbon in May [{mark['id']}]."}))
        api = home.get("/v1/recall", about="people.arnold", layers="marks", summary="true")
        assert api.json()["summary"] == f"Arnold is moving to Lisbon in May [{mark['id']}]."

    # The CLI reads with the daemon stopped, and asks the model itself.
    server.say(json.dumps({"answer": f"He moves to Lisbon [{mark['id']}]."}))
    result = home.cli("memory", "recall", "people.arnold", "--summary", "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["summary"] == f"He moves to Lisbon [{mark['id']}]."
    server.say(json.dumps({"answer": f"Lisbon, in May [{mark['id']}]."}))
    table = home.cli("memory", "recall", "people.arnold", "--summary", "--layers", "marks")
    assert table.returncode == 0, table.stderr
    assert "summary" in table.stdout and "Lisbon, in May" in table.stdout
    assert f"{mark['id']}, inferred by {mark['observed_by']}" in table.stdout
    stated = home.cli("memory", "recall", "people", "--provenance", "stated", "--json")
    assert json.loads(stated.stdout)["marks"] == []
    inferred = home.cli("memory", "recall", "people", "--provenance", "inferred", "--json")
    assert [m["id"] for m in json.loads(inferred.stdout)["marks"]] == [mark["id"]]

    sent = json.dumps(server.requests)
    assert "hunter22" not in sent, "the password never left the machine"
    assert all(h["Authorization"] == f"Bearer {KEY}" for h in server.headers)
    assert KEY not in home.config.read_text()
    summary_prompt = server.requests[-1]["messages"][-1]["content"]
    assert re.search(rf"\[{mark['id']}\] people\.arnold\.home: Arnold is moving", summary_prompt)


def test_the_daemon_refuses_to_start_when_the_key_variable_is_unset(
    tmp_path: Path, server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = llm_home(tmp_path, server, monkeypatch)
    monkeypatch.delenv("CAMBIUM_TEST_LLM_KEY")
    result = home.cli("run", "--config", str(home.config))
    assert result.returncode == 2
    assert "llm.api_key_env" in result.stderr and "CAMBIUM_TEST_LLM_KEY" in result.stderr
    assert not home.socket.exists()
