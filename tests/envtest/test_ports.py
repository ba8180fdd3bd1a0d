"""Ports for the test and benchmark servers come from below the ephemeral range, where no
outgoing connection can take one between its pick and its server's bind."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

from tests.support import ports


def test_ports_are_below_the_ephemeral_range_distinct_and_bindable() -> None:
    first = int(ports.PORT_RANGE_FILE.read_text().split()[0])
    picked = [ports.free_port() for _ in range(200)]
    assert all(ports.LOWEST <= port < first for port in picked)
    assert len(set(picked)) == len(picked), "never handed out twice"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", picked[-1]))


def test_a_reseeded_random_does_not_repeat_the_picks() -> None:
    # pytest-randomly seeds `random` the same in every xdist worker: the picks must not follow.
    random.seed(1)
    one = ports.free_port()
    random.seed(1)
    assert ports.free_port() != one


def test_a_port_taken_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        taken = sock.getsockname()[1]
        monkeypatch.setattr(ports, "_listen_range", lambda: range(taken, taken + 2))
        assert ports.free_port() == taken + 1, "the listening port is skipped"


def test_without_the_range_file_the_kernel_picks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(ports, "PORT_RANGE_FILE", tmp_path / "missing")
    assert ports._listen_range() == range(0)
    assert 0 < ports.free_port() < 65536
