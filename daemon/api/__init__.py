"""The ingress: HTTP/JSON over a Unix socket (and, optionally, token-guarded loopback TCP),
one router per resource; a person's commands go through :mod:`daemon.services.commands`.
May import services and everything below them; never Loom, the CLI or the process
(:mod:`daemon.composition` mounts Loom beside it)."""
