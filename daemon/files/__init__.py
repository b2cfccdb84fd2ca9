"""The file layers: substrate (read-only), daily (the only files the daemon writes), compost
(read-only), the text index they share, and the watcher that keeps the substrate cache
fresh. May import ``daemon.core`` only: no SQL, no bus."""
