"""The log's delivery states, derived from the cursors and the failure rows alone: what
``cambium signals --status``, ``signals show``, health and ``retry`` read (SQLite, and
PostgreSQL when configured)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text
from support import T0, make_signal

from daemon.store import DeliveriesPending, DeliveryCounts, NewSignal, Store, Stored, Tx

LATER = T0 + timedelta(minutes=5)


def append(store: Store, signal_type: str, n: int) -> Stored:
    signal = make_signal(signal_type, {"n": n}, source_id=f"source-{n}")
    [stored] = store.write_sync(lambda tx: tx.signals.append([NewSignal(signal, LATER)]))
    return stored


def settle(tx: Tx, receptor: str, count: int) -> None:
    position, pending = tx.signals.next_deliveries(receptor, count)
    assert tx.signals.settle(receptor, pending[:count], position, T0)


def give_up_on_next(tx: Tx, receptor: str) -> None:
    position, [first, *_] = tx.signals.next_deliveries(receptor, 1)
    assert tx.signals.record_failure(first, position, "it broke", T0, retry_at=None)


def fail_next_once(tx: Tx, receptor: str) -> None:
    position, [first, *_] = tx.signals.next_deliveries(receptor, 1)
    assert tx.signals.record_failure(first, position, "try again", T0, retry_at=LATER)


@pytest.fixture
def log(store: Store) -> dict[str, Stored]:
    """Two receptors part way through a log:

    ======  =====================  =====================
    signal  a (test.ping)          b (test.ping, other)
    ======  =====================  =====================
    p1      delivered              delivered
    p2      dead                   delivered
    p3      delivered              pending (dead, retried)
    p4      pending                delivered (after failing once)
    o1      -                      dead
    u1      -                      -  (unrouted)
    ======  =====================  =====================

    and a receptor ``late`` that binds test.ping but began after all of them."""
    store.write_sync(lambda tx: tx.signals.register("a", {"test.ping"}, T0))
    store.write_sync(lambda tx: tx.signals.register("b", {"test.ping", "test.other"}, T0))
    stored = {
        "p1": append(store, "test.ping", 1),
        "p2": append(store, "test.ping", 2),
        "p3": append(store, "test.ping", 3),
        "p4": append(store, "test.ping", 4),
        "o1": append(store, "test.other", 5),
        "u1": append(store, "nobody.listens", 6),
    }
    store.write_sync(lambda tx: tx.signals.register("late", {"test.ping"}, T0))
    store.write_sync(lambda tx: settle(tx, "a", 1))
    store.write_sync(lambda tx: give_up_on_next(tx, "a"))
    store.write_sync(lambda tx: settle(tx, "a", 1))
    store.write_sync(lambda tx: settle(tx, "b", 2))
    store.write_sync(lambda tx: give_up_on_next(tx, "b"))
    store.write_sync(lambda tx: fail_next_once(tx, "b"))
    store.write_sync(lambda tx: settle(tx, "b", 1))
    store.write_sync(lambda tx: give_up_on_next(tx, "b"))
    assert store.write_sync(lambda tx: tx.signals.revive_dead(stored["p3"].id, LATER)) == ["b"]
    return stored


def test_each_signal_shows_each_receptor_where_it_is(store: Store, log: dict[str, Stored]) -> None:
    statuses = {
        name: store.read_sync(lambda tx, s=s: tx.signals.status(s.id)) for name, s in log.items()
    }
    assert statuses == {
        "p1": {"a": "delivered", "b": "delivered"},
        "p2": {"a": "dead", "b": "delivered"},
        "p3": {"a": "delivered", "b": "pending"},
        "p4": {"a": "pending", "b": "delivered"},
        "o1": {"b": "dead"},
        "u1": {},
    }
    assert store.read_sync(lambda tx: tx.signals.open_counts()) == DeliveryCounts(pending=2, dead=2)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("dead", ["o1", "p2"]),
        ("pending", ["p4", "p3"]),
        ("delivered", ["p4", "p3", "p2", "p1"]),
        ("unrouted", ["u1"]),
        ("no-such-status", []),
        (None, ["u1", "o1", "p4", "p3", "p2", "p1"]),
    ],
)
def test_the_listing_by_status_agrees_with_each_signal(
    store: Store, log: dict[str, Stored], status: str | None, expected: list[str]
) -> None:
    listed = store.read_sync(lambda tx: tx.signals.listing(status=status))
    names = {stored.id: name for name, stored in log.items()}
    assert [names[line.id] for line in listed] == expected


def test_a_dead_delivery_retried_by_hand_is_pending_again_from_its_first_attempt(
    store: Store, log: dict[str, Stored]
) -> None:
    p2 = log["p2"].id
    assert store.write_sync(lambda tx: tx.signals.revive_dead(p2, LATER, receptor="b")) == []
    assert store.write_sync(lambda tx: tx.signals.revive_dead(log["p4"].id, LATER)) == []
    assert store.write_sync(lambda tx: tx.signals.revive_dead(p2, LATER, receptor="a")) == ["a"]
    assert store.write_sync(lambda tx: tx.signals.revive_dead(p2, LATER)) == []  # not dead now
    found = store.read_sync(lambda tx: tx.signals.get(p2))
    assert found is not None
    assert [d.to_json() for d in found.deliveries] == [
        {
            "receptor": "a",
            "status": "pending",
            "attempts": 0,
            "last_error": "it broke",
            "next_attempt_at": None,
            "delivered_at": None,
        },
        {
            "receptor": "b",
            "status": "delivered",
            "attempts": 1,
            "last_error": None,
            "next_attempt_at": None,
            "delivered_at": None,
        },
    ]
    _, [revived] = store.read_sync(lambda tx: tx.signals.next_deliveries("a", 10))
    assert (revived.signal.id, revived.revived, revived.attempts) == (p2, True, 0)


def test_a_listing_line_says_what_the_cli_prints(store: Store, log: dict[str, Stored]) -> None:
    [line] = store.read_sync(lambda tx: tx.signals.listing(status="dead", signal_type="test.ping"))
    assert line.to_json() == {
        "id": log["p2"].id,
        "seq": log["p2"].seq,
        "type": "test.ping",
        "source_id": "source-2",
        "workspace_id": "default",
        "emitted_at": "2026-04-11T10:00:00Z",
        "stored_at": "2026-04-11T10:05:00Z",
        "deliveries": [
            {"receptor": "a", "status": "dead", "attempts": 1, "last_error": "it broke"},
            {"receptor": "b", "status": "delivered", "attempts": 1, "last_error": None},
        ],
    }


def test_the_listing_filters_by_type_and_source_newest_first_up_to_its_limit(
    store: Store, log: dict[str, Stored]
) -> None:
    names = {stored.id: name for name, stored in log.items()}

    def listed(**filters: Any) -> list[str]:
        return [
            names[line.id] for line in store.read_sync(lambda tx: tx.signals.listing(**filters))
        ]

    assert listed(signal_type="test.ping") == ["p4", "p3", "p2", "p1"]
    assert listed(source="source-5") == ["o1"]
    assert listed(signal_type="test.ping", source="source-5") == []
    assert listed(limit=2) == ["u1", "o1"]
    assert listed(status="delivered", signal_type="test.ping", limit=3) == ["p4", "p3", "p2"]


def test_the_payloads_governance_reads_stay_in_their_workspace(store: Store) -> None:
    def stored(workspace: str, n: int) -> str:
        signal = make_signal("memory.observation", {"n": n}, workspace_id=workspace)
        store.write_sync(lambda tx: tx.signals.append([NewSignal(signal, LATER)]))
        return signal.id

    mine, theirs, asked_for = stored("w", 1), stored("other", 2), stored("other", 3)
    found = store.read_sync(
        lambda tx: tx.signals.payloads("w", ["memory.observation"], [asked_for])
    )
    assert sorted(found, key=lambda pair: pair[1]["n"]) == [
        (mine, {"n": 1}),
        (asked_for, {"n": 3}),
    ]
    assert theirs not in dict(found)


def test_a_delivery_delivered_after_failing_shows_when(
    store: Store, log: dict[str, Stored]
) -> None:
    found = store.read_sync(lambda tx: tx.signals.get(log["p4"].id))
    assert found is not None
    shown = found.to_json()
    assert (shown["seq"], shown["stored_at"]) == (log["p4"].seq, "2026-04-11T10:05:00Z")
    assert shown["deliveries"] == [
        {
            "receptor": "a",
            "status": "pending",
            "attempts": 0,
            "last_error": None,
            "next_attempt_at": None,
            "delivered_at": None,
        },
        {
            "receptor": "b",
            "status": "delivered",
            "attempts": 2,
            "last_error": None,
            "next_attempt_at": None,
            "delivered_at": "2026-04-11T10:00:00Z",
        },
    ]


def test_a_stored_signal_reads_back_as_it_was_emitted(store: Store) -> None:
    signal = make_signal(
        "test.ping",
        {"n": 1},
        signal_class="procedure",
        source_layer="tool",
        workspace_id="w",
        cascade_potential=True,
        affinity=["food"],
        idempotency_key="ping-1",
        correlation_id="conversation-7",
        causation_id="sg-cause",
    )
    store.write_sync(lambda tx: tx.signals.append([NewSignal(signal, LATER)]))
    found = store.read_sync(lambda tx: tx.signals.get(signal.id))
    assert found is not None
    assert found.signal.to_json_dict() == signal.to_json_dict()


def two_failures(store: Store) -> tuple[Stored, Stored]:
    """Receptor ``r``: its first signal dead and retried by hand (below the cursor), its
    second failed once and waiting to be retried (above it)."""
    store.write_sync(lambda tx: tx.signals.register("r", {"test.ping"}, T0))
    first, second = append(store, "test.ping", 1), append(store, "test.ping", 2)
    store.write_sync(lambda tx: give_up_on_next(tx, "r"))
    store.write_sync(lambda tx: fail_next_once(tx, "r"))
    assert store.write_sync(lambda tx: tx.signals.revive_dead(first.id, LATER)) == ["r"]
    return first, second


def test_a_hand_retried_delivery_is_settled_once_and_alone(store: Store) -> None:
    first, second = two_failures(store)
    position, [revived] = store.read_sync(lambda tx: tx.signals.next_deliveries("r", 10))
    assert revived.signal.id == first.id

    def settle_revived(tx: Tx) -> bool:
        return tx.signals.settle("r", [revived], position, LATER)

    assert store.write_sync(settle_revived) is True
    assert store.write_sync(settle_revived) is False, "settled already: not again"
    late = store.write_sync(
        lambda tx: tx.signals.record_failure(revived, position, "late", LATER, retry_at=LATER)
    )
    assert late is False, "a failure of a delivery settled meanwhile writes nothing"

    def shown(stored: Stored) -> tuple[str, int]:
        found = store.read_sync(lambda tx: tx.signals.get(stored.id))
        assert found is not None
        [state] = found.deliveries
        return state.status, state.attempts

    assert shown(first) == ("delivered", 1)
    assert shown(second) == ("pending", 1), "the other failure is still to be retried"


def test_a_failure_of_a_delivery_settled_elsewhere_writes_nothing(store: Store) -> None:
    store.write_sync(lambda tx: tx.signals.register("r", {"test.ping"}, T0))
    stored = append(store, "test.ping", 1)
    position, [delivery] = store.read_sync(lambda tx: tx.signals.next_deliveries("r", 10))
    store.write_sync(lambda tx: tx.signals.settle("r", [delivery], position, T0))  # elsewhere
    for retry_at in (LATER, None):
        late = store.write_sync(
            lambda tx, retry_at=retry_at: tx.signals.record_failure(
                delivery, position, "broke", LATER, retry_at
            )
        )
        assert late is False
    assert store.read_sync(lambda tx: tx.signals.status(stored.id)) == {"r": "delivered"}
    assert store.read_sync(lambda tx: tx.signals.open_counts()) == DeliveryCounts()


def test_an_import_waits_until_nothing_is_left_to_deliver(
    store: Store, log: dict[str, Stored]
) -> None:
    exported = store.read_sync(lambda tx: list(tx.signals.all_rows()))
    head = store.read_sync(lambda tx: tx.signals.head())
    with pytest.raises(DeliveriesPending) as refused:
        store.write_sync(lambda tx: tx.signals.restore(exported, LATER))
    assert str(refused.value) == (
        "2 deliveries are still pending: start the daemon and let them be delivered"
        " (cambium status), then import"
    )
    assert store.read_sync(lambda tx: tx.signals.head()) == head, "nothing written"


def test_an_export_holds_the_log_in_order_after_payloads_were_replaced(store: Store) -> None:
    stored = [append(store, "test.ping", n) for n in range(3)]
    forgotten = {"forgotten": "tb_1"}
    store.write_sync(lambda tx: tx.signals.replace_payloads([stored[0].id], forgotten))
    rows = store.read_sync(lambda tx: list(tx.signals.all_rows()))
    assert [(row["id"], row["payload"]) for row in rows] == [
        (stored[0].id, forgotten),
        (stored[1].id, {"n": 1}),
        (stored[2].id, {"n": 2}),
    ]


def test_the_types_and_sources_stored_each_once_in_order(store: Store) -> None:
    for n, signal_type in enumerate(["test.pong", "test.ping", "test.pong"]):
        append(store, signal_type, n % 2)
    assert store.read_sync(lambda tx: tx.signals.types()) == ["test.ping", "test.pong"]
    assert store.read_sync(lambda tx: tx.signals.sources()) == ["source-0", "source-1"]


def test_a_forget_redacts_the_failure_that_holds_its_text_and_no_other(store: Store) -> None:
    store.write_sync(lambda tx: tx.signals.register("a", {"test.ping"}, T0))
    for n in (1, 2):
        append(store, "test.ping", n)

    def fail_next(tx: Tx, error: str) -> None:
        position, [first, *_] = tx.signals.next_deliveries("a", 1)
        assert tx.signals.record_failure(first, position, error, T0, retry_at=None)

    store.write_sync(lambda tx: fail_next(tx, "no room for the dentist on tuesday"))
    store.write_sync(lambda tx: fail_next(tx, "disk full"))

    def redact(value: Any) -> Any:
        return value.replace("dentist", "[forgotten]") if isinstance(value, str) else value

    assert store.write_sync(lambda tx: tx.signals.redact_failures(redact)) == 1
    rows = store.read_sync(
        lambda tx: tx.connection.execute(
            text("SELECT last_error FROM delivery_failures ORDER BY seq")
        ).all()
    )
    assert [error for (error,) in rows] == ["no room for the [forgotten] on tuesday", "disk full"]


def test_deliveries_revived_out_of_order_come_back_in_log_order(store: Store) -> None:
    store.write_sync(lambda tx: tx.signals.register("a", {"test.ping"}, T0))
    stored = [append(store, "test.ping", n) for n in (1, 2, 3)]
    for _ in stored:
        store.write_sync(lambda tx: give_up_on_next(tx, "a"))
    for revived in reversed(stored):  # the newest retried first
        assert store.write_sync(lambda tx, s=revived: tx.signals.revive_dead(s.id, LATER)) == ["a"]
    _, pending = store.read_sync(lambda tx: tx.signals.next_deliveries("a", 10))
    assert [(d.seq, d.revived) for d in pending] == [(s.seq, True) for s in stored]


def test_registering_a_receptor_sets_its_own_binds_and_no_others(store: Store) -> None:
    """A daemon's start registers each receptor with what it binds now (a receptor that
    learned a type since binds it from then on); the others keep theirs."""
    store.write_sync(lambda tx: tx.signals.register("a", {"test.ping"}, T0))
    store.write_sync(lambda tx: tx.signals.register("b", {"test.other"}, T0))
    store.write_sync(lambda tx: tx.signals.register("a", {"test.ping", "test.new"}, T0))
    binds = {c.receptor: c.binds for c in store.read_sync(lambda tx: tx.signals.cursors())}
    assert binds == {"a": {"test.ping", "test.new"}, "b": {"test.other"}}


def test_a_redaction_changes_only_the_failures_that_hold_the_text(store: Store) -> None:
    """A forget redacts a signal's failure at one receptor; another receptor's failure of
    the same signal keeps its own error."""
    for receptor in ("a", "b"):
        store.write_sync(lambda tx, r=receptor: tx.signals.register(r, {"test.ping"}, T0))
    append(store, "test.ping", 1)
    for receptor, error in (("a", "failed on Anna's secret"), ("b", "disk full")):

        def fail(tx: Tx, r: str = receptor, e: str = error) -> None:
            position, [first] = tx.signals.next_deliveries(r, 1)
            assert tx.signals.record_failure(first, position, e, T0, retry_at=None)

        store.write_sync(fail)

    def redact(value: Any) -> Any:
        return value.replace("Anna's secret", "[forgotten]") if isinstance(value, str) else value

    assert store.write_sync(lambda tx: tx.signals.redact_failures(redact)) == 1
    query = text("SELECT receptor, last_error FROM delivery_failures ORDER BY receptor")
    errors = store.read_sync(lambda tx: [tuple(row) for row in tx.connection.execute(query)])
    assert errors == [("a", "failed on [forgotten]"), ("b", "disk full")]
