"""The file layers: substrate (read-only), daily (the only files the daemon writes), compost
(read-only), the one way they touch the disk (``fs``), and the watcher that keeps the
substrate cache fresh. They rank with :mod:`daemon.search`. May import ``daemon.core`` and
``daemon.search`` only: no SQL, no bus."""
