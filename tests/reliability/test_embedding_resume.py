"""A SIGKILL in the middle of embedding loses at most the page in flight: the next run
embeds only what was not stored, and the memory-mapped copy recall searches is repaired to
match the store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from daemon.store import Store
from daemon.store.migrate import upgrade

pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")
pytestmark = pytest.mark.subprocess  # runs the worker in a child process

HERE = Path(__file__).resolve().parent.parent
DAY = date(2026, 4, 11)
LINES = [f"line {n}: tea with friend number {n} by the river" for n in range(1, 41)]


def run(url: str, tmp_path: Path, pause: float, *, kill_after: int | None) -> list[str]:
    """Run the child; with ``kill_after``, SIGKILL it once that many texts were embedded.
    The texts it embedded, in order."""
    child = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "embedding_process.py"),
            url,
            str(tmp_path / "daily"),
            str(tmp_path / "vectors"),
            str(pause),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{HERE}:{HERE / 'integration'}"},
    )
    assert child.stdout is not None
    embedded = []
    for line in child.stdout:
        if line.startswith("embedded "):
            embedded.append(line.removeprefix("embedded ").rstrip("\n"))
            if kill_after is not None and len(embedded) >= kill_after:
                child.send_signal(signal.SIGKILL)
                break
    child.wait(timeout=60)
    assert child.returncode == (0 if kill_after is None else -signal.SIGKILL)
    return embedded


def stored(url: str) -> dict[int, int]:
    """part -> id of the day's stored vectors."""
    store = Store(url)
    try:
        held = store.read_sync(lambda tx: tx.dense.at("daily", DAY.isoformat(), "live"))
    finally:
        store.close()
    return {part: id_ for part, (id_, _) in held.items()}


def test_a_killed_worker_resumes_without_embedding_again_what_it_stored(
    db_url: str, tmp_path: Path
) -> None:
    (tmp_path / "daily").mkdir()
    (tmp_path / "daily" / f"{DAY}.md").write_text("\n".join(LINES) + "\n")
    upgrade(db_url)
    first = run(db_url, tmp_path, 0.05, kill_after=40)  # 4 lines a page, 2 texts a line
    before = stored(db_url)
    assert 0 < len(before) < len(LINES)  # killed in the middle
    second = run(db_url, tmp_path, 0.0, kill_after=None)
    after = stored(db_url)
    assert sorted(after) == list(range(1, len(LINES) + 1))
    # What was stored before the kill was kept as it was, and not embedded again: each
    # text is a line said (line n) or a window (lines n-1 to n+1), so a stored line's
    # texts are exactly the ones the second run must not ask for.
    assert all(after[part] == id_ for part, id_ in before.items())
    stored_texts = {LINES[part - 1] for part in before}
    assert stored_texts <= set(first)
    assert not stored_texts & set(second)
    assert len(second) == 2 * (len(LINES) - len(before))
    # The copy recall searches matches the store again.
    store = Store(db_url)
    try:
        _, generation = store.read_sync(lambda tx: tx.dense.model_and_generation())
    finally:
        store.close()
    header = (tmp_path / "vectors.json").read_text()
    assert f'"generation": {generation}' in header
