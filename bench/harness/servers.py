"""The servers a benchmark starts: ``snapready serve`` and the constant webhook.

Both run as ``python -m ...`` of this interpreter from the repository root, in their own session,
with the environment minus ``SNAPREADY_*`` and ``KUBE*`` (a benchmark sets what it means), their
output in a log file; next to a control plane they are recorded in its descriptor. Readiness is an
HTTPS GET answering 200 (snapready's ``/readyz``: caches synced, scope written; the constant
server's ``/counts``). The call counters are the servers' own: snapready's
``snapready_admission_requests_total`` on its metrics port, the constant server's ``/counts``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import urllib3

from bench.harness.objects import ROOT
from bench.harness.plane import BenchError, stop_named, wait
from tests.envtest.controlplane import (
    ControlPlane,
    ProcessRecord,
    launch,
    start_time,
    stop_processes,
)
from tests.support.snapready_proc import generate_certs

METRIC_LINE = re.compile(r"^snapready_admission_requests_total\{([^}]*)\}\s+(\S+)$", re.MULTILINE)


@dataclass
class Server:
    """A server process of a benchmark."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    began: float
    """``time.monotonic()`` just before it was started."""
    began_wall: float
    """``time.time()`` just before it was started (log timestamps are wall-clock)."""


def certificates(folder: Path) -> Path:
    """A new CA and a serving certificate for 127.0.0.1 in ``folder`` (``ca.crt``, ``tls.crt``,
    ``tls.key``, as ``snapready certs`` writes them)."""
    return generate_certs(folder)


def spawn(
    argv: list[str],
    log: Path,
    env: dict[str, str],
    *,
    plane: ControlPlane | None = None,
    name: str = "",
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session from the repository root, output to ``log``; recorded
    as ``name`` in ``plane``'s descriptor, so its watchdog stops it if the benchmark dies."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("SNAPREADY_", "KUBE"))}
    process = launch(argv, log, env={**inherited, **env}, cwd=ROOT)
    if plane is not None:
        plane.record(name, process.pid, log)
    return process


@dataclass(frozen=True)
class Launcher:
    """Starts a benchmark's servers: logs in ``folder``, recorded in ``plane`` when there is one."""

    folder: Path
    plane: ControlPlane | None = None

    def program(self, name: str, argv: list[str], port: int, env: dict[str, str]) -> Server:
        """``argv`` as server ``name`` on ``port``, logging to ``folder/name.log``."""
        log = self.folder / f"{name}.log"
        began_wall, began = time.time(), time.monotonic()
        process = spawn(argv, log, env, plane=self.plane, name=name)
        return Server(name, process, port, log, began, began_wall)

    def module(self, name: str, argv: list[str], port: int, env: dict[str, str]) -> Server:
        """``python -m argv`` (this interpreter) as server ``name`` on ``port``."""
        return self.program(name, [sys.executable, "-m", *argv], port, env)

    def snapready(self, name: str, args: list[str], port: int, **env: str) -> Server:
        """``snapready serve args``; no shutdown drain unless ``env`` or a settings file says so."""
        drain = {"SNAPREADY_SERVER__DRAIN_SECONDS": "0", **env}
        return self.module(name, ["webhook", "serve", *args], port, drain)

    def constant(self, port: int, certs: Path, *, echo: bool) -> Server:
        """The constant webhook (``bench.harness.constant``) with the certificate in ``certs``;
        ``echo``: it answers with the request's uid (an API server checks it), else a fixed
        body."""
        argv = ["bench.harness.constant", str(port), str(certs / "tls.crt"), str(certs / "tls.key")]
        return self.module("constant", [*argv, "--echo"] if echo else argv, port, {})


def stop_servers(
    servers: list[Server], *, plane: ControlPlane | None = None, timeout: float = 15
) -> None:
    """SIGTERM (then SIGKILL) the servers' sessions by pid, dropped from ``plane``'s descriptor
    when they were recorded there; reaped."""
    if plane is not None:
        stop_named(plane, *(server.name for server in servers), timeout=timeout)
    else:
        pids = [(s.name, s.process.pid) for s in servers]
        stop_processes([ProcessRecord(n, p, start_time(p), "") for n, p in pids], timeout)
    for server in servers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.process.wait(2)


def https_get(port: int, path: str, ca: Path, timeout: float = 2.0) -> tuple[int, bytes]:
    """GET over HTTPS to 127.0.0.1, trusting ``ca``."""
    with urllib3.HTTPSConnectionPool(
        "127.0.0.1", port, ca_certs=str(ca), cert_reqs="CERT_REQUIRED", retries=False
    ) as pool:
        response = pool.request("GET", path, timeout=timeout)
        return response.status, response.data


def wait_ready(
    server: Server,
    ca: Path,
    path: str = "/readyz",
    timeout: float = 90.0,
    every: float = 0.1,
    *,
    probe: Callable[[], tuple[int, bytes]] | None = None,
) -> float:
    """Seconds from the server's start until ``path`` answers 200 over HTTPS (or ``probe``
    returns status 200), polled every ``every``."""
    last = b""
    get = probe or partial(https_get, server.port, path, ca)

    def up() -> bool:
        nonlocal last
        if server.process.poll() is not None:
            log = server.log.read_text(errors="replace")[-3000:]
            raise BenchError(f"{server.name} exited with {server.process.returncode}:\n{log}")
        try:
            status, last = get()
        except urllib3.exceptions.HTTPError:
            return False
        return status == 200

    try:
        wait(f"{server.name} on port {server.port}", up, timeout, every)
    except BenchError as error:
        raise BenchError(f"{error}; last answer: {last[:600]!r}; log {server.log}") from None
    return time.monotonic() - server.began


def snapready_counts(metrics_port: int) -> dict[str, float]:
    """``snapready_admission_requests_total`` summed by endpoint, from snapready's /metrics."""
    with urllib3.HTTPConnectionPool("127.0.0.1", metrics_port, retries=False) as pool:
        text = pool.request("GET", "/metrics", timeout=5).data.decode()
    counts: dict[str, float] = defaultdict(float)
    for labels, value in METRIC_LINE.findall(text):
        endpoint = re.search(r'endpoint="([^"]*)"', labels)
        counts[endpoint.group(1) if endpoint else "?"] += float(value)
    return dict(counts)


def constant_counts(port: int, ca: Path) -> dict[str, float]:
    """The constant server's own POST counter, by path (``mutate``, ``validate``)."""
    counts: dict[str, float] = json.loads(https_get(port, "/counts", ca, timeout=5)[1])
    return {path.strip("/"): value for path, value in counts.items()}
