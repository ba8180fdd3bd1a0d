"""``snapready serve --source kube`` on a ``make bench-scale`` cluster, and what one run measured.

Started as admin (``--kubeconfig`` of the control plane) with static scope, leader election on,
HTTPS and metrics on free ports; measured: seconds from process start to ``/readyz`` 200 (every
cache synced), when each cache finished its list (from the server's own log lines), RSS and peak
RSS and CPU seconds after sync and again after settling.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bench.harness import proc
from bench.harness.identity import RELEASE, RELEASE_NS
from bench.harness.objects import Obj
from bench.harness.servers import Launcher, Server, stop_servers, wait_ready
from tests.envtest.controlplane import ControlPlane
from tests.support.ports import free_port


@dataclass
class Figures:
    """What one ``snapready serve`` run measured."""

    label: str
    ready_s: float = 0.0
    rss_sync_mib: float = 0.0
    hwm_sync_mib: float = 0.0
    rss_settled_mib: float = 0.0
    hwm_settled_mib: float = 0.0
    cpu_sync_s: float = 0.0
    cpu_settle_s: float = 0.0
    rss_after_load_mib: float = 0.0
    listed: dict[str, tuple[float, int]] = field(default_factory=dict)
    """cache -> (seconds after start when its list was in, objects listed)."""


@dataclass
class Snapready:
    """A running ``snapready serve`` on one of the bench's control planes."""

    label: str
    plane: ControlPlane
    server: Server
    figures: Figures
    metrics_port: int = 0
    """Its plain-HTTP ``/metrics`` port."""

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def log(self) -> Path:
        return self.server.log

    @property
    def pid(self) -> int:
        return self.server.process.pid


def start(label: str, plane: ControlPlane, kubeconfig: Path, certs: Path, tmp: Path) -> Snapready:
    """``snapready serve --source kube`` against ``plane`` with ``kubeconfig`` (snapready's
    ServiceAccount with the chart's RBAC, its Lease in the chart's release namespace, as the
    chart runs it); recorded in the plane's descriptor, so its watchdog stops it too if the
    bench dies."""
    port, metrics = free_port(), free_port()
    args = ["--source", "kube", "--kubeconfig", str(kubeconfig), "--host",
            "127.0.0.1", "--port", str(port), "--cert-file", str(certs / "tls.crt"),
            "--key-file", str(certs / "tls.key"), "--metrics-port", str(metrics)]  # fmt: skip
    # The chart's Role lets its ServiceAccount hold the Lease `<fullname>` in its namespace.
    env = {"POD_NAMESPACE": RELEASE_NS, "SNAPREADY_LEADER__LEASE_NAME": RELEASE}
    server = Launcher(tmp, plane).snapready(f"snapready-{label}", args, port, **env)
    return Snapready(label, plane, server, Figures(label), metrics)


def wait_synced(snapready: Snapready, ca: Path, timeout: float) -> None:
    """Poll ``/readyz`` every 50 ms; fill in ready time, RSS and per-cache list times."""
    figures = snapready.figures
    figures.ready_s = wait_ready(snapready.server, ca, timeout=timeout, every=0.05)
    memory = proc.memory_mib(snapready.pid)
    figures.rss_sync_mib, figures.hwm_sync_mib = memory["VmRSS"], memory["VmHWM"]
    figures.cpu_sync_s = proc.cpu_ms(snapready.pid) / 1000
    time.sleep(0.3)  # the log is flushed line by line; give it a moment
    for entry in log_entries(snapready.log):
        message = str(entry.get("msg", ""))
        if ": listed " in message:
            cache, _, rest = message.partition(": listed ")
            moment = datetime.strptime(entry["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
            began = snapready.server.began_wall
            figures.listed[cache] = (moment.timestamp() - began, int(rest.split()[0]))


def settle(snapready: Snapready, seconds: float) -> None:
    """RSS, peak RSS and CPU seconds spent after ``seconds`` more."""
    cpu = proc.cpu_ms(snapready.pid)
    time.sleep(seconds)
    memory = proc.memory_mib(snapready.pid)
    figures = snapready.figures
    figures.rss_settled_mib, figures.hwm_settled_mib = memory["VmRSS"], memory["VmHWM"]
    figures.cpu_settle_s = (proc.cpu_ms(snapready.pid) - cpu) / 1000


def stop(snapready: Snapready) -> None:
    """Stop it by pid; dropped from the plane's descriptor."""
    stop_servers([snapready.server], plane=snapready.plane)


def log_entries(path: Path, offset: int = 0) -> Iterator[Obj]:
    """The JSON log lines of ``path`` from byte ``offset`` (other lines are skipped)."""
    with path.open("rb") as handle:
        handle.seek(offset)
        for line in handle:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    yield entry
