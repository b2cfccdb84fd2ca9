"""End to end, checked on bytes: a subject observed, consolidated by a (fake) model, seeded,
embedded (semantic recall on, the real model: the vectors are rows of the store and a
memory-mapped copy) and exported, then forgotten with the real CLI. Afterwards the text is
nowhere: not in the SQLite files (db, -wal, -shm), no vector or hash of it in the store or
the vector file, not in the daily archive, the daemon's log or a new export; recall
no longer serves it; the live line that still mentions it is listed, not rewritten. A
forget that matches nothing exits 1 naming the pattern, and leaves no tombstone."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from chat_server import ChatServer, chat_server, facts

from daemon.testing import DaemonHome, running

pytest.importorskip("onnxruntime", reason="needs pip install 'cambium-memory[semantic]'")
semantic = pytest.importorskip(
    "daemon.search.semantic", reason="needs pip install 'cambium-memory[semantic]'"
)

KEY = "test-key-0123456789abcdef"
SECRET = "Okafor"  # a word only the forgotten texts hold
LINE = f"dentist with Dr {SECRET} on Friday at 3pm, root canal"
INFERRED = f"Has a root canal with Dr {SECRET} on Friday at 3pm"
OBSERVED = f"Dr {SECRET}'s practice is on Elm Street"
KEPT = "lunch with Bea by the river"
# Yesterday in the daemon's zone: a mark is as old as its evidence, and recall leaves out
# what has withered, so the day noted must be recent.
DAY = (datetime.now(ZoneInfo("Europe/Berlin")).date() - timedelta(days=1)).isoformat()


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as started:
        yield started


def ok(home: DaemonHome, *args: str) -> str:
    result = home.cli(*args)
    assert result.returncode == 0, result.stderr + home.log_text()
    return result.stdout


def on_disk(home: DaemonHome) -> dict[str, bytes]:
    """Every file the daemon keeps that may hold the text, by name."""
    root = home.root
    files = [p for p in root.iterdir() if p.name.startswith(("cambium.db", "embeddings."))]
    files += list((root / "memory" / "daily" / "archive").iterdir())
    files.append(home.log)
    return {str(p.relative_to(root)): p.read_bytes() for p in files if p.is_file()}


def test_a_forgotten_subject_leaves_no_byte_behind(
    tmp_path: Path, server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAMBIUM_TEST_LLM_KEY", KEY)
    home = DaemonHome(
        tmp_path,
        extra_config=f"""
[consolidation]
extractor = "openai"
[llm]
base_url = "{server.url}"
model = "test-model"
api_key_env = "CAMBIUM_TEST_LLM_KEY"
[recall]
semantic = true
""",
    )
    server.say(facts(("user.health.dentist", INFERRED, 2, 2)))
    with running(home):
        ok(home, "memory", "note", KEPT, "--date", DAY)
        ok(home, "memory", "note", LINE, "--date", DAY)
        ok(home, "memory", "consolidate", "--date", DAY)
        observed = {
            "subject": "user.health.clinic",
            "observation": OBSERVED,
            "evidence": {"note": "chat"},
        }
        ok(
            home,
            "emit",
            "memory.observation",
            "--payload",
            json.dumps(observed),
            "--source-id",
            "chat",
        )
        marks = home.get("/v1/recall", about="user.health", layers="marks").json()["marks"]
        assert {m["observation"] for m in marks} == {INFERRED, OBSERVED}
        planted = {
            "subject": "user.health.dentist",
            "proposed_change": "add: sees a dentist every spring",
            "target_file": "long-term/health.md",
            "based_on_marks": [m["id"] for m in marks],
        }
        ok(
            home,
            "emit",
            "memory.seed_planted",
            "--payload",
            json.dumps(planted),
            "--source-id",
            "chat",
        )
        ok(home, "memory", "note", "call the dentist to move Friday")  # today's live file
        # The worker embeds the marks' texts and the lines; both are found.
        wait_until_embedded(home)
        found = home.get("/v1/recall", about="root canal appointment").json()
        assert SECRET in json.dumps(found["daily"]) and SECRET in json.dumps(found["marks"])
        stored = vectors_of(home, forgotten_hashes())
        assert len(stored) == 2 + 2  # the marks', and the lines' (the line, and its neighbour)
        stored += [laid_out(value) for value in stored]  # and as the search's matrix holds them
        matrices = on_disk(home)["embeddings.i8"] + on_disk(home)["embeddings.marks.i8"]
        assert all(laid_out(value) in matrices for value in stored[:4])
        before = home.root / "before.tar"
        ok(home, "export", str(before))
        assert SECRET.encode() in before.read_bytes()

        nothing = home.cli("memory", "forget", "user.nothing", "--reason", "typo")
        assert nothing.returncode == 1, nothing.stdout
        assert "user.nothing" in nothing.stderr
        forgot = ok(home, "memory", "forget", "user.health", "--reason", "private")
        assert "forgot user.health: 2 marks" in forgot
        live = home.root / "memory" / "daily"
        [listed] = [line for line in forgot.splitlines() if line.startswith("  ")]
        assert listed.strip().startswith(str(live)) and listed.endswith(".md:1")

        found = home.get("/v1/recall", about="root canal appointment").json()
        assert SECRET not in json.dumps(found)
        assert SECRET not in json.dumps(home.get("/v1/recall", about="health").json())
        after = home.root / "after.tar"
        ok(home, "export", str(after))
        [tombstone] = json.loads(ok(home, "memory", "tombstones", "--json"))
        assert tombstone["marks_erased"] == 2
    files = on_disk(home) | {"after.tar": after.read_bytes()}
    digests = forgotten_hashes()
    assert vectors_of(home, digests) == []
    for name, data in files.items():
        assert SECRET.encode() not in data, f"{name} still holds the text"
        assert not any(d in data for d in digests), f"{name} still holds a hash of the text"
        assert not any(v in data for v in stored), f"{name} still holds a vector of the text"
    assert KEPT.encode() in files["after.tar"]  # the check would see text that is there
    archived = (live / "archive" / f"{DAY}.md").read_text()
    assert archived == f"{KEPT}\n[forgotten: {tombstone['id']}]\n"
    assert "call the dentist to move Friday" in "".join(p.read_text() for p in live.glob("*.md"))


def forgotten_hashes() -> list[bytes]:
    """What the forgotten texts are stored under: the marks' observations, the line's
    meaning and its neighbour's (whose window holds it; the day's lines as noted)."""
    from daemon.search.fusion import meaning_hash
    from daemon.services.embedding_worker import document_hashes

    return [meaning_hash((INFERRED,)), meaning_hash((OBSERVED,)), *document_hashes([KEPT, LINE])]


def vectors_of(home: DaemonHome, hashes: list[bytes]) -> list[bytes]:
    from daemon.store import Store

    store = Store(f"sqlite:///{home.root / 'cambium.db'}")
    try:
        found = store.read_sync(lambda tx: tx.dense.by_hash(hashes))
    finally:
        store.close()
    return [vector.values for vector in found.values()]


def laid_out(values: bytes) -> bytes:
    from daemon.search.vector_file import offset

    return offset(values).tobytes()


def wait_until_embedded(home: DaemonHome) -> None:
    deadline = time.monotonic() + 180  # a bound for a busy machine, not a speed goal
    while True:
        coverage = home.get("/v1/health").json()["embedding"]
        if coverage["embedded"] == coverage["total"] and coverage["total"] >= 4:
            return
        assert time.monotonic() < deadline, coverage
        time.sleep(0.2)
