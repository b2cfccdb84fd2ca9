"""The client's own rules, checked before anything is sent."""

from __future__ import annotations

import pytest

from daemon.client import Client


def test_tcp_needs_loopback() -> None:
    with pytest.raises(ValueError, match="loopback"):
        Client(url="http://192.0.2.1:8765", token="x" * 16)
