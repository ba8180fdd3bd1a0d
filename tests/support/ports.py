"""Free loopback ports for test and benchmark servers (conftest, the control plane, the benches).

A port found free with ``bind(0)`` is free only until the server meant for it binds it, and
``bind(0)`` draws from the kernel's ephemeral range, the range every outgoing connection takes
its local port from: the API server's connections to etcd, a client's to the API server, pip's
to a local proxy. One of those could take the port in between (a clean-clone CI run:
``cannot listen on 127.0.0.1:59667: Address already in use``). So ports are drawn below that
range (``/proc/sys/net/ipv4/ip_local_port_range``; Linux's default starts at 32768), where only
listeners live, at random per process (``SystemRandom``: pytest-randomly reseeds ``random``
alike in every xdist worker), checked bindable, and never handed out twice by one process.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10_000
"""The lowest port handed out (well above the privileged ports and the usual services)."""
ATTEMPTS = 1_000

_given: set[int] = set()
_lock = threading.Lock()
_random = random.SystemRandom()


def _listen_range() -> range:
    """``LOWEST`` up to the ephemeral range's start (``range(0)`` when it cannot be read or
    starts too low to leave room)."""
    try:
        first = int(PORT_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return range(0)
    return range(LOWEST, first) if first - LOWEST >= 1_000 else range(0)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """An unused TCP port on 127.0.0.1, below the ephemeral range where it can be (else the
    kernel's ``bind(0)`` pick), not handed out before by this process. Also usable as a closed
    port: nothing listens on it.

    Raises:
        RuntimeError: no free port after ``ATTEMPTS`` draws.
    """
    ports = _listen_range()
    with _lock:
        for _ in range(ATTEMPTS):
            if ports:
                port = _random.choice(ports)
                if port in _given or not _bindable(port):
                    continue
            else:
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", 0))
                    port = sock.getsockname()[1]
                if port in _given:
                    continue
            _given.add(port)
            return port
    raise RuntimeError(f"no free loopback port after {ATTEMPTS} draws")
