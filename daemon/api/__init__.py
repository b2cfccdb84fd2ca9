"""The ingress: HTTP/JSON over a Unix socket (and, optionally, token-guarded loopback TCP)."""
