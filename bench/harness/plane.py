"""The control plane a benchmark runs on, the benchmark's work folder, and its clean-up.

One way to start a control plane: ``tests/envtest/controlplane.py``, the one the pytest plugin
starts (etcd + kube-apiserver + kube-controller-manager on 127.0.0.1, binaries from ``make
envtest``), here with its build log and descriptor in the benchmark's folder. Every process a
benchmark starts next to it is recorded in the plane's descriptor (``servers.spawn``), so that the
plane's watchdog stops it too if the benchmark dies, and is stopped by pid, never by name.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from bench.harness.objects import ROOT
from tests.envtest.controlplane import (
    ControlPlane,
    find_assets,
    start_with_retries,
    stop_processes,
)


class BenchError(RuntimeError):
    """The benchmark cannot go on (the message says why)."""


def assets(tmp: Path) -> Path:
    """The control plane binaries (built once by ``make envtest``, cached)."""
    return find_assets(tmp / "envtest-build.log")


def start_plane(binaries: Path, tmp: Path, label: str, *, profiling: bool = False) -> ControlPlane:
    """A control plane in ``tmp/label`` (descriptor ``tmp/label.json``), once it is usable; with
    ``profiling`` the API server serves ``/debug/pprof/`` (``bench.cluster --profile``)."""
    return start_with_retries(binaries, tmp / label, tmp / f"{label}.json", profiling=profiling)


def stop_named(plane: ControlPlane, *names: str, timeout: float = 15) -> None:
    """Stop the recorded processes ``names`` by pid and drop them from the descriptor."""
    records = [record for record in plane.processes if record.name in names]
    stop_processes(records, timeout=timeout)
    plane.processes = [record for record in plane.processes if record.name not in names]
    plane.save()


def pid_of(plane: ControlPlane, name: str) -> int:
    """The pid of the recorded process ``name``."""
    return next(record.pid for record in plane.processes if record.name == name)


@dataclass(frozen=True)
class Versions:
    """What ran: the snapready tree, kube-apiserver and etcd."""

    tree: str
    apiserver: str
    etcd: str


def versions(plane: ControlPlane, binaries: Path) -> Versions:
    """``git describe`` of this tree, the API server's ``gitVersion``, ``etcd --version``."""
    apiserver = json.loads(plane.get("/version")[1]).get("gitVersion", "?")
    etcd = subprocess.run(
        [str(binaries / "etcd"), "--version"], capture_output=True, text=True, check=False
    ).stdout.split("\n", 1)[0]
    tree = subprocess.run(
        ["git", "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    ).stdout.strip()
    return Versions(tree or "?", apiserver, etcd)


def wait(what: str, check: Callable[[], bool], timeout: float = 60.0, every: float = 0.1) -> None:
    """Poll ``check`` every ``every`` seconds until true; :class:`BenchError` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


@contextlib.contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt, so the clean-up in ``finally`` runs."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    # Ctrl-C too, even when started with SIGINT ignored (a background job of a script).
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def run_in_folder(name: str, keep: Path | None, body: Callable[[Path], int]) -> int:
    """``body(folder)`` in ``keep`` (kept) or a temporary folder, with SIGTERM/SIGHUP/Ctrl-C
    turned into a clean stop (exit 130) and a :class:`BenchError` into one line (exit 1)."""
    try:
        with terminated_as_interrupt():
            if keep:
                keep.mkdir(parents=True, exist_ok=True)
                return body(keep.resolve())
            with tempfile.TemporaryDirectory(prefix=f"snapready-{name}-") as tmp:
                return body(Path(tmp))
    except KeyboardInterrupt as interrupt:
        why = str(interrupt) or "Ctrl-C"
        print(f"interrupted ({why}); every process was stopped", file=sys.stderr)
        return 130
    except BenchError as error:
        print(f"{name} failed: {error}", file=sys.stderr)
        return 1
