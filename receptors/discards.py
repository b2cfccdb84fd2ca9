"""``memory.delivery_discarded``: a person giving up on dead deliveries for good (a payload
that can never be applied, a cause that will not be fixed), so they stop counting as dead.
The discard is a signal, so the log says who did it and when; the deliveries keep their last
error and say they were discarded. What died after the discard was emitted is not touched."""

from __future__ import annotations

from typing import ClassVar

from daemon.bus import StoreReceptor
from daemon.core import signal_types
from daemon.core.signal import Signal
from daemon.schema.payloads import DeliveryDiscarded
from daemon.store import Tx
from receptors.common import parse_payload


class DiscardReceptor(StoreReceptor):
    key: ClassVar[str] = "discards"
    binds: ClassVar[frozenset[str]] = frozenset({signal_types.DELIVERY_DISCARDED})

    def apply(self, tx: Tx, signal: Signal) -> None:
        asked = parse_payload(DeliveryDiscarded, signal)
        tx.signals.discard_dead(
            asked.signal_id, asked.receptor, signal.source_id, signal.emitted_at, signal.id
        )
