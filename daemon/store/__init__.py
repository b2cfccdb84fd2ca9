"""The SQL store: engine set-up, the single group-committing writer, migrations, and one
repository per table family (:class:`SignalLog`, :class:`Marks`, :class:`Seeds`) that names
every database operation once and returns typed records.

Other packages import what they need from here (migrations, :mod:`daemon.store.migrate`,
and the PostgreSQL-only :mod:`daemon.store.notify` aside); the modules inside are the
store's own.

May import ``daemon.core`` only."""

from daemon.store.deliveries import Delivery, DeliveryCounts
from daemon.store.engine import Store, Tx, make_engine
from daemon.store.marks import Marks
from daemon.store.seeds import Seeds
from daemon.store.signals import DeliveriesPending, NewSignal, SignalLog, Stored

__all__ = [
    "DeliveriesPending",
    "Delivery",
    "DeliveryCounts",
    "Marks",
    "NewSignal",
    "Seeds",
    "SignalLog",
    "Store",
    "Stored",
    "Tx",
    "make_engine",
]
