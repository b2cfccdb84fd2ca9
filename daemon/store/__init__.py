"""The SQL store: engine set-up, the single group-committing writer, migrations, and one
repository per table family (:class:`SignalLog`, :class:`Marks`, :class:`Seeds`,
:class:`TextRows` for the text index) that names every database operation once and returns
typed records; :class:`StoreTextIndex` is the text index the file layers rank from.

Other packages import what they need from here; the modules inside are the store's own
(``daemon.store.migrate``, which loads Alembic, and ``daemon.store.notify``, which needs
psycopg, are imported by name where they are needed).

May import ``daemon.core`` only."""

from daemon.store.activity import Found, Reinforced
from daemon.store.deliveries import Delivery, DeliveryCounts
from daemon.store.dense_rows import DenseRows
from daemon.store.engine import Store, Tx, check_sqlite_file, make_engine
from daemon.store.errors import (
    DeliveriesPending,
    StoreCorrupt,
    StoreInUse,
    StoreLost,
    WriterClosed,
)
from daemon.store.failure import describe_failure
from daemon.store.lock import StoreLock
from daemon.store.marks import Marks, MarkText, fingerprint
from daemon.store.seeds import Seeds
from daemon.store.signals import NewSignal, SignalLog, Stored
from daemon.store.store_text_index import StoreTextIndex
from daemon.store.text_index import TextRows

__all__ = [
    "DeliveriesPending",
    "Delivery",
    "DeliveryCounts",
    "DenseRows",
    "Found",
    "MarkText",
    "Marks",
    "NewSignal",
    "Reinforced",
    "Seeds",
    "SignalLog",
    "Store",
    "StoreCorrupt",
    "StoreInUse",
    "StoreLock",
    "StoreLost",
    "StoreTextIndex",
    "Stored",
    "TextRows",
    "Tx",
    "WriterClosed",
    "check_sqlite_file",
    "describe_failure",
    "fingerprint",
    "make_engine",
]
