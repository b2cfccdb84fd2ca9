"""The signal bus: persist every signal, then deliver it to the receptors bound to its type.
May import ``daemon.core`` and ``daemon.store``; never the API, the CLI or the process.

``bus`` is the bus itself (emit, lifecycle, ownership), ``inline`` the store receptors'
path inside the emit's transaction, ``workers`` the per-receptor delivery loops, ``retry``
the policy that decides when a failed delivery is tried again, ``leases`` who applies which
receptor in a fleet, ``receptor`` what the bus delivers to."""

from daemon.bus.bus import BusClosed, SignalBus
from daemon.bus.receptor import (
    DeliveryContext,
    PayloadError,
    Receptor,
    StoppedAt,
    StoreReceptor,
    Undeliverable,
)
from daemon.bus.retry import RetryPolicy

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
