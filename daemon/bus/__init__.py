"""The signal bus: persist every signal, then deliver it to the receptors bound to its type.
May import ``daemon.core`` and ``daemon.store``; never the API, the CLI or the process."""

from daemon.bus.bus import BusClosed, RetryPolicy, SignalBus
from daemon.bus.receptor import (
    DeliveryContext,
    PayloadError,
    Receptor,
    StoppedAt,
    StoreReceptor,
    Undeliverable,
)

__all__ = [
    "BusClosed",
    "DeliveryContext",
    "PayloadError",
    "Receptor",
    "RetryPolicy",
    "SignalBus",
    "StoppedAt",
    "StoreReceptor",
    "Undeliverable",
]
