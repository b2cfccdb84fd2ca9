"""The daemon end to end: the real ``cambium run`` as a subprocess, spoken to over its real
Unix socket (with curl where the issue asks for it)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest
from sqlalchemy import create_engine, insert, select

from daemon.store.tables import RhythmStateTable, SignalTable
from daemon.testing import DaemonHome, running
from rhythms.template import bundled_templates, latest_slot

PATIENCE = 30.0  # seconds to wait for the watcher (a bound for a busy machine, not a timing check)

pytestmark = pytest.mark.subprocess  # starts `cambium` as a subprocess

OBSERVATION = {
    "type": "memory.observation",
    "source_id": "agent-e2e",
    "payload": {
        "subject": "user.food.vegetables",
        "observation": "roast vegetables at 180C",
        "evidence": {"note": "said in chat"},
    },
}


@pytest.fixture
def home(tmp_path: Path) -> DaemonHome:
    return DaemonHome(tmp_path)


def curl(home: DaemonHome, *args: str) -> tuple[int, dict[str, object]]:
    out = subprocess.run(
        ["curl", "-s", "-w", "\n%{http_code}", "--unix-socket", str(home.socket), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    body, _, status = out.rpartition("\n")
    return int(status), json.loads(body)


def test_emit_recall_stop_and_the_mark_survives_a_restart(home: DaemonHome) -> None:
    with running(home):
        schema = home.get("/openapi.json").json()
        assert {"/v1/signals", "/v1/recall", "/v1/seeds", "/v1/health"} <= set(schema["paths"])
        status, body = curl(
            home,
            "-X", "POST", "http://cambium/v1/signals?wait=5",
            "-H", "content-type: application/json",
            "-d", json.dumps(OBSERVATION),
        )  # fmt: skip
        assert status == 201 and body["duplicate"] is False
        assert body["deliveries"] == {"observation": "delivered"}
        status, recalled = curl(home, "http://cambium/v1/recall?about=user.food")
        assert status == 200
        assert [m["observation"] for m in recalled["marks"]] == ["roast vegetables at 180C"]  # type: ignore[index]
        assert home.stop(signal.SIGTERM) == 0
        assert not home.socket.exists(), "the socket is removed on a clean stop"
    with running(home):
        again = home.get("/v1/recall", about="user.food").json()
        assert [m["observation"] for m in again["marks"]] == ["roast vegetables at 180C"]
        assert home.stop(signal.SIGINT) == 0


def test_the_daemon_runs_on_uvloop_and_says_so_when_ready(home: DaemonHome) -> None:
    """uvloop's transports cost the daemon less CPU per request than asyncio's."""
    with running(home):
        deadline = time.monotonic() + PATIENCE  # (the line follows the socket's first answer)
        while (ready := _logged(home, "ready")) is None and time.monotonic() < deadline:
            time.sleep(0.01)
    assert ready is not None and ready["loop"] == "uvloop"


def _until_ready(home: DaemonHome, starts: int) -> None:
    """Until the log says the daemon is ready for the ``starts``-th time: its rhythms'
    catch-up is done (``running`` kills it at the end of its block)."""
    deadline = time.monotonic() + PATIENCE
    while home.log_text().count('"event": "ready"') < starts:
        assert time.monotonic() < deadline, f"not ready:\n{home.log_text()}"
        time.sleep(0.01)


def _logged(home: DaemonHome, event: str) -> dict[str, object] | None:
    entries = (json.loads(line) for line in home.log_text().splitlines() if line.startswith("{"))
    return next((dict(entry) for entry in entries if entry.get("event") == event), None)


def test_socket_is_private_and_tcp_needs_the_token(home: DaemonHome, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = tmp_path / "token"
    token.write_text("s3cret-token-of-enough-length\n")
    token.chmod(0o600)
    home.ingress_config = f'tcp = "127.0.0.1:{port}"\ntoken_file = "{token}"\n'
    home.write_config()
    with running(home):
        assert stat.S_IMODE(home.socket.stat().st_mode) == 0o600
        assert stat.S_IMODE(home.run_dir.stat().st_mode) == 0o700
        base = f"http://127.0.0.1:{port}/v1/health"
        assert httpx.get(base, timeout=10).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert httpx.get(base, headers=wrong, timeout=10).status_code == 401
        right = {"Authorization": "Bearer s3cret-token-of-enough-length"}
        assert httpx.get(base, headers=right, timeout=10).status_code == 200


def test_bad_requests_get_field_errors_and_the_daemon_keeps_serving(home: DaemonHome) -> None:
    with running(home):
        status, body = curl(
            home, "-X", "POST", "http://cambium/v1/signals", "-d", '{"type": "memory.observation"}'
        )
        assert status == 422
        assert body["errors"] == [{"field": "source_id", "message": "Field required"}]
        status, body = curl(home, "-X", "POST", "http://cambium/v1/signals", "-d", "{not json")
        assert status == 422
        huge = json.dumps(OBSERVATION | {"payload": {"blob": "x" * (2 * 1024 * 1024)}})
        response = home.post("/v1/signals", content=huge.encode())
        assert response.status_code == 413
        response = home.get("/v1/recall", about="x", layers="marks,nope")
        assert response.status_code == 422 and "layers" in response.text
        response = home.get("/v1/recall", about="x", horizon="yesterday")
        assert response.status_code == 422 and "horizon" in response.text
        response = home.get("/v1/recall", limit="many")
        assert response.status_code == 422
        assert {e["field"] for e in response.json()["errors"]} == {"limit"}, (
            "about may be left out: it means everything"
        )
        response = home.post("/v1/seeds/nope/review", {"decision": "maybe"})
        assert response.status_code == 422
        assert {e["field"] for e in response.json()["errors"]} == {"decision", "reviewer"}
        assert home.get("/v1/health").json()["status"] == "ok"
        assert home.get("/v1/signals/nope").status_code == 404
        stored = home.post("/v1/signals", OBSERVATION | {"idempotency_key": "k1"}).json()
        again = home.post("/v1/signals", OBSERVATION | {"idempotency_key": "k1"})
        assert again.status_code == 200 and again.json() == {"id": stored["id"], "duplicate": True}


def test_substrate_edits_are_seen_by_the_running_daemon(home: DaemonHome) -> None:
    """Edits in place, saves by rename, new files and rewrites all reach recall without a
    restart. How soon is measured in ``bench.watcher``, not here: the wait is only bounded."""
    soul = home.root / "SOUL.md"
    soul.write_text("# Soul\nI am patient.\n")
    lessons = home.root / "memory" / "long-term" / "lessons.md"
    lessons.write_text("# Lessons\nNothing yet.\n")

    def seen(word: str) -> bool:
        hits = home.get("/v1/recall", about=word, layers="substrate").json()["substrate"]
        return any(word in hit["excerpt"].lower() for hit in hits)

    def eventually_seen(word: str) -> None:
        deadline = time.monotonic() + PATIENCE
        while not seen(word):
            if time.monotonic() > deadline:
                pytest.fail(f"{word!r} never reached recall")
            time.sleep(0.02)

    with running(home):
        assert seen("patient")
        with soul.open("a") as f:  # edit in place
            f.write("I love gardening.\n")
        eventually_seen("gardening")
        replacement = home.root / ".SOUL.md.swp"  # an editor's save: write, then rename over
        replacement.write_text("# Soul\nI love pottery now.\n")
        os.replace(replacement, soul)
        eventually_seen("pottery")
        assert not seen("gardening")
        (home.root / "memory" / "long-term" / "new.md").write_text("Kayaking on Sundays.\n")
        eventually_seen("kayaking")
        lessons.write_text("# Lessons\nSalt the pasta water.\n")
        eventually_seen("pasta")


def test_the_daemon_watches_the_daily_files_and_sees_a_hand_edit(home: DaemonHome) -> None:
    """A recall looks at the daily files only after the directory's watch saw a change (a
    look stats every file): the daemon sets the watch, and a hand edit reaches recall."""
    today = datetime.now(ZoneInfo("Europe/Berlin")).date()
    day_file = home.root / "memory" / "daily" / f"{today.isoformat()}.md"
    day_file.parent.mkdir(parents=True, exist_ok=True)
    day_file.write_text("tea with Anna\n")

    def seen(word: str) -> bool:
        hits = home.get("/v1/recall", about=word, layers="daily").json()["daily"]
        return any(word in hit["excerpt"].lower() for hit in hits)

    with running(home):
        assert seen("anna")
        with day_file.open("a") as f:
            f.write("coffee with Bruno\n")  # by hand (it wakes the watch, if not set yet)
        deadline = time.monotonic() + PATIENCE
        while not seen("bruno"):
            assert time.monotonic() < deadline, "the hand edit never reached recall"
            time.sleep(0.1)
        while (watching := _logged(home, "watching the daily files")) is None:
            assert time.monotonic() < deadline, "the daily directory was never watched"
            time.sleep(0.02)
        assert watching["directory"] == str(day_file.parent)


def test_invalid_config_exits_2_naming_the_key_and_leaves_no_socket(home: DaemonHome) -> None:
    home.extra_config = "[observation]\nreinforce_delta = 3\n"
    home.write_config()
    result = home.cli("run", "--config", str(home.config))
    assert result.returncode == 2
    assert "observation.reinforce_delta" in result.stderr
    assert not home.socket.exists()
    home.extra_config = '[consolidation]\nextractor = "gpt-9"\n'
    home.write_config()
    result = home.cli("run", "--config", str(home.config))
    assert result.returncode == 2 and "consolidation.extractor" in result.stderr
    assert not home.socket.exists()


def test_a_stale_socket_is_replaced_and_a_live_one_is_not_stolen(
    home: DaemonHome, tmp_path: Path
) -> None:
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(home.socket))  # bound, never listening: what a crash leaves behind
    stale.close()
    with running(home):
        assert home.get("/v1/health").status_code == 200
        # Another store, the same socket: the socket is what refuses it.
        other = DaemonHome(tmp_path / "other", db_url=f"sqlite:///{tmp_path / 'other.db'}")
        config = other.config.read_text().replace("run/cambium.sock", str(home.socket))
        other.config.write_text(config)
        second = other.cli("run", "--config", str(other.config))
        assert second.returncode == 1
        assert "another daemon is already listening" in second.stderr
        assert home.get("/v1/health").status_code == 200, "the first daemon still serves"


def test_systemd_notify_ready_watchdog_and_stopping(home: DaemonHome, tmp_path: Path) -> None:
    notify_path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(notify_path))
        listener.settimeout(20)
        env = home.env() | {"NOTIFY_SOCKET": str(notify_path), "WATCHDOG_USEC": "200000"}
        process = subprocess.Popen(
            [str(Path(home.cli.__globals__["CAMBIUM"])), "run", "--config", str(home.config)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            # The migration's EXTEND_TIMEOUT_USEC and STATUS come first; each recv is bounded.
            messages = [listener.recv(100)]
            while messages.count(b"WATCHDOG=1") < 2:  # pings every WATCHDOG_USEC / 2
                messages.append(listener.recv(100))
            assert b"READY=1" in messages[: messages.index(b"WATCHDOG=1")], "ready, then pings"
            assert home.get("/v1/health").status_code == 200, "ready means serving"
            process.send_signal(signal.SIGTERM)
            while (message := listener.recv(100)) == b"WATCHDOG=1":
                pass
            assert message == b"STOPPING=1"
            assert process.wait(20) == 0
        finally:
            if process.poll() is None:
                process.kill()


def test_a_daemon_down_over_the_nightly_slot_fires_it_once_at_start(home: DaemonHome) -> None:
    url = f"sqlite:///{home.root / 'cambium.db'}"
    assert home.cli("db", "upgrade", "--config", str(home.config)).returncode == 0
    first = datetime.now(UTC) - timedelta(days=3)
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            insert(RhythmStateTable.__table__),  # type: ignore[attr-defined]
            [{"name": "consolidation", "first_scheduled_at": first}],
        )
    [consolidation] = [t for t in bundled_templates("Europe/Berlin") if t.name == "consolidation"]
    # The daemon's clock is the wall clock: a slot passing while it runs would be fired live
    # as well as caught up. Never run across one (a few seconds' run, two minutes' margin).
    now = datetime.now(UTC)
    upcoming = latest_slot(consolidation, now, now + timedelta(minutes=2))
    if upcoming is not None:
        pytest.skip(f"the nightly slot {upcoming.isoformat()} is due within two minutes")

    def fired() -> list[tuple[str | None, dict[str, object]]]:
        with engine.connect() as connection:
            rows = connection.execute(
                select(SignalTable.idempotency_key, SignalTable.payload).where(
                    SignalTable.type == "memory.consolidate"
                )
            ).all()
        return [(r[0], r[1]) for r in rows]

    with running(home):
        _until_ready(home, 1)  # (the socket answers while the start catches up)
        health = home.get("/v1/health").json()
        slot = latest_slot(consolidation, first, now)
        assert slot is not None
    assert len(fired()) == 1
    key, payload = fired()[0]
    assert key == f"rhythm:consolidation:{slot.isoformat().replace('+00:00', 'Z')}"
    berlin_day = slot.astimezone(ZoneInfo("Europe/Berlin")).date()
    assert payload == {"through": (berlin_day - timedelta(days=1)).isoformat()}
    next_fire = datetime.fromisoformat(health["rhythms"]["consolidation"].replace("Z", "+00:00"))
    assert next_fire.astimezone(ZoneInfo("Europe/Berlin")).strftime("%H:%M") == "03:00"
    with running(home):
        _until_ready(home, 2)
    assert len(fired()) == 1, "a second restart does not fire the slot again"
    engine.dispose()
