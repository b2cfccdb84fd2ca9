"""Cambium Memory: a local daemon that gives a personal AI assistant a memory that lasts.

The public surface is small; everything else lives in private-by-convention modules:

- :class:`Signal` - what other processes emit (``daemon.core.signal``)
- :class:`SignalBus` - persist, then deliver (``daemon.bus``)
- :class:`Receptor`, :class:`StoreReceptor` - what the bus delivers to
- :func:`recall` - what the memory knows about something (``daemon.services.recall``)
"""

__version__ = "0.1.0"
