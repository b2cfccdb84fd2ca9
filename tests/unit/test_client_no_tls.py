"""A client for a Unix socket or plain loopback HTTP builds no TLS context: loading the CA
bundle cost `cambium status` a third of a second, for a connection that never speaks TLS."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from daemon.client import AsyncClient, Client


def _refuse(*args: object, **kwargs: object) -> ssl.SSLContext:
    raise AssertionError("a TLS context with the CA bundle was built")


@pytest.fixture(autouse=True)
def no_default_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ssl, "create_default_context", _refuse)


def test_a_socket_client_builds_no_tls_context(tmp_path: Path) -> None:
    with Client(tmp_path / "cambium.sock") as client:
        assert client.where == str(tmp_path / "cambium.sock")


def test_a_loopback_http_client_builds_no_tls_context() -> None:
    with Client(url="http://127.0.0.1:8765", token="t" * 32) as client:
        assert client.where == "http://127.0.0.1:8765"


@pytest.mark.asyncio
async def test_an_async_socket_client_builds_no_tls_context(tmp_path: Path) -> None:
    async with AsyncClient(tmp_path / "cambium.sock") as client:
        assert client.where == str(tmp_path / "cambium.sock")


def test_https_to_loopback_still_verifies() -> None:
    with pytest.raises(AssertionError, match="TLS context"):
        Client(url="https://127.0.0.1:8765")
