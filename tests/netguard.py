"""A pytest fixture that disables Python networking beyond loopback and records attempts."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest


def _loopback(address: Any) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every non-loopback connect or DNS lookup fails and is recorded."""
    attempts: list[Any] = []
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        if self.family == getattr(socket, "AF_UNIX", None) or _loopback(address):
            return real_connect(self, address)
        attempts.append(address)
        raise OSError("network disabled in this test")

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is None or _loopback(host if isinstance(host, str) else host.decode()):
            return real_getaddrinfo(host, *args, **kwargs)
        attempts.append(host)
        raise socket.gaierror("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", lambda s, a: connect(s, a) or 0)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # prove it, do not just promise it
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    yield attempts
    assert attempts == [], f"tried to reach the network: {attempts}"
