"""The errors the store raises to its callers, each saying what went wrong in its message.
(:class:`~daemon.store.migrate.MigrationFailed` is the migrations' own.)"""

from __future__ import annotations


class StoreLost(RuntimeError):
    """The database file was deleted or replaced while the daemon ran: nothing is written."""


class StoreCorrupt(RuntimeError):
    """The database cannot be used as it is; the message says what is wrong with it."""


class StoreInUse(RuntimeError):
    """Another daemon holds the store; the message names it."""


class WriterClosed(RuntimeError):
    """The writer is stopped; nothing was written."""


class DeliveriesPending(RuntimeError):
    """An import was refused: receptors have signals left to deliver."""
