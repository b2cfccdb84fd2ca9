"""The SQL store: engine set-up, the single group-committing writer, migrations, and one
repository per table family (:class:`SignalLog`, :class:`Marks`, :class:`Seeds`) that names
every database operation once and returns typed records.

May import ``daemon.core`` only."""

from daemon.store.engine import Store, Tx, make_engine
from daemon.store.marks import Marks
from daemon.store.seeds import Seeds
from daemon.store.signals import SignalLog

__all__ = ["Marks", "Seeds", "SignalLog", "Store", "Tx", "make_engine"]
