"""The lock taken in turn: a thread that gives it back and asks again at once waits behind
those that asked before it (a plain lock let the index's upkeep keep a note out for 4 s)."""

from __future__ import annotations

import threading
import time

from daemon.core.turns import InTurn


def test_the_lock_goes_to_whoever_asked_first() -> None:
    turns = InTurn()
    got: list[str] = []
    asked = threading.Event()

    def greedy() -> None:  # takes it again at once, as the upkeep's loop does
        for _ in range(50):
            with turns:
                got.append("greedy")
                asked.set()
                time.sleep(0.002)

    def polite() -> None:
        asked.wait(5)
        with turns:
            got.append("polite")

    threads = [threading.Thread(target=greedy), threading.Thread(target=polite)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert got.count("polite") == 1
    assert got.index("polite") <= 2, f"it waited for {got.index('polite')} turns of the other"


def test_an_error_inside_gives_the_turn_on() -> None:
    turns = InTurn()
    try:
        with turns:
            raise ValueError("the job failed")
    except ValueError:
        pass
    done = threading.Event()
    threading.Thread(target=lambda: (turns.__enter__(), done.set())).start()
    assert done.wait(5)
