"""Free loopback ports for test servers (shared by conftest and the GCS emulator helpers)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """An unused TCP port on 127.0.0.1 (also usable as a closed port: nothing listens)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
