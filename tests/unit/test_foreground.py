"""The embedder's background batches make way for foreground work (a recall): one running
is stopped as the foreground begins, and none starts until the foreground has been quiet
for a moment."""

from __future__ import annotations

import threading

import pytest

embedding = pytest.importorskip(
    "daemon.search.embedding", reason="needs pip install 'cambium-memory[semantic]'"
)


def waiting(foreground: embedding.Foreground, resumed: list[str]) -> threading.Thread:
    def wait() -> None:
        resumed.append(
            "resumed" if foreground.wait_until_quiet(lambda: resumed.append("then")) else "stopped"
        )

    thread = threading.Thread(target=wait)
    thread.start()
    return thread


def test_a_batch_waits_for_the_foreground_and_a_quiet_moment_after_it() -> None:
    now = [100.0]
    preempted: list[int] = []
    foreground = embedding.Foreground(lambda: preempted.append(1), clock=lambda: now[0])
    resumed: list[str] = []
    waiting(foreground, resumed).join(5)
    assert resumed == ["then", "resumed"]  # nothing ran in the foreground: at once

    resumed.clear()
    with foreground.running():
        assert preempted == [1]  # the batch running now is stopped
        thread = waiting(foreground, resumed)
        thread.join(0.2)
        assert thread.is_alive() and resumed == []
    thread.join(0.2)
    assert thread.is_alive()  # the foreground ended this instant: not quiet yet
    now[0] += embedding.QUIET_SECONDS
    thread.join(5)
    assert resumed == ["then", "resumed"]


def test_a_stopped_embedder_ends_the_wait() -> None:
    foreground = embedding.Foreground(lambda: None)
    resumed: list[str] = []
    with foreground.running():
        thread = waiting(foreground, resumed)
        foreground.stop()
        thread.join(5)
    assert resumed == ["stopped"]
