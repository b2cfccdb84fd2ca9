"""Observation signals for the reliability tests: each says something no other says, so each
makes a mark of its own, and carries an idempotency key so it can be retried safely."""

from __future__ import annotations


def observation(run: str, n: int) -> dict[str, object]:
    """Signal number ``n`` of the test run ``run`` (a lowercase word)."""
    return {
        "type": "memory.observation",
        "source_id": f"{run}-test",
        "idempotency_key": f"{run}-{n}",
        "payload": {
            "subject": f"{run}.subject{n}",
            "observation": f"observation number {n} of the {run} test",
            "evidence": {"note": f"{run} test"},
        },
    }
