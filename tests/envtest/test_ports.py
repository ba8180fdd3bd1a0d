"""Ports for the test and benchmark servers come from below the ephemeral range, where no
outgoing connection can take one between its pick and its server's bind."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

from tests.support import ports

needs_range = pytest.mark.skipif(
    not ports._listen_range(), reason="no room below this host's ephemeral range (or no /proc)"
)


@needs_range
def test_ports_are_below_the_ephemeral_range_distinct_and_bindable() -> None:
    first = int(ports.PORT_RANGE_FILE.read_text().split()[0])
    picked = [ports.free_port() for _ in range(200)]
    assert all(ports.LOWEST <= port < first for port in picked)
    assert len(set(picked)) == len(picked), "never handed out twice"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", picked[-1]))


@needs_range
def test_a_reseeded_random_does_not_repeat_the_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest-randomly seeds `random` the same in every xdist worker: two workers must not draw
    # the same ports (each process's own record of what it gave cannot see the other's).
    picks = []
    for _ in range(2):
        monkeypatch.setattr(ports, "_given", set())  # as a fresh worker
        random.seed(1)
        picks.append([ports.free_port() for _ in range(5)])
    assert picks[0] != picks[1]


@needs_range
def test_a_port_taken_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_given", set())
    low = ports._listen_range()
    for taken in range(low.start, low.stop - 1):  # a pair of free ports below the range
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", taken))
            except OSError:
                continue
            sock.listen()
            if not ports._bindable(taken + 1):
                continue
            pair = range(taken, taken + 2)
            monkeypatch.setattr(ports, "_listen_range", lambda pair=pair: pair)
            assert ports.free_port() == taken + 1, "the listening port is skipped"
            return
    pytest.fail("no two free ports below the ephemeral range")


def test_without_the_range_file_the_kernel_picks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(ports, "PORT_RANGE_FILE", tmp_path / "missing")
    assert ports._listen_range() == range(0)
    assert 0 < ports.free_port() < 65536
