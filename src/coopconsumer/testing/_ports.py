"""Loopback port and address helpers. Standard library only."""

from __future__ import annotations

import socket

from .._errors import ConfigurationError

__all__ = ["free_port", "split_address"]


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago.

    The port is found by binding to port 0 and closing the socket, so another process
    may take it before the caller binds it; :func:`embedded_broker` retries startup on
    a fresh port when that happens.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def split_address(address: str) -> tuple[str, int]:
    """Split ``"host:port"`` (IPv6 hosts in brackets) into its parts."""
    host, sep, port_text = address.strip().rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigurationError(f"broker address {address!r} is not 'host:port'")
    return host.strip("[]"), int(port_text)
