"""The ingress: HTTP/JSON over a Unix socket (and, optionally, token-guarded loopback TCP),
one router per resource. May import services and everything below them; never the CLI or
the process (which composes it)."""
