"""``python -m bench.scale --reports``: what policy reports cost at scale
(docs/concepts/reports.md).

After the usual measurements the scale cluster gets OpenReports' own CRDs
(``tests/data/reports/``), and snapready's ServiceAccount the chart's report grant (the
ClusterRole the chart renders with ``reports.api=openreports``, bound as a second role). Then
``snapready serve`` runs twice on the scale cluster with the default ``reports.*`` settings
(OpenReports found by discovery):

1. first start: no report exists; the leader's first audit pass judges every selected pod and
   writes a report for each one that has a result to keep (``reports.results``: fail, warn,
   error), paced by ``reports.writes_per_second`` (10/s);
2. restart: a new leader's first pass over the same cluster, every report already right: it
   reads and judges, and writes nothing.

Measured per phase, from the server's own log line (``audit pass 1 done in N s``), its
``/metrics`` (``snapready_reports_total{action}``, ``snapready_report_objects``) and the API
server: report objects (``remainingItemCount`` of a one-item list), writes and writes per
minute, the pass's wall time, the CPU it took, RSS after it, and the growth of etcd's database.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import urllib3
import yaml

from bench.harness import proc
from bench.harness.api import Api, create
from bench.harness.identity import RELEASE, RELEASE_NS
from bench.harness.objects import Obj
from bench.harness.plane import BenchError, wait
from bench.harness.proc import MIB
from bench.harness.servers import Launcher, stop_servers, wait_ready
from bench.harness.stats import markdown_table
from bench.scale.serve import log_entries
from tests.envtest.controlplane import ControlPlane
from tests.support.ports import free_port
from tests.support.webhooks import render_chart

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "reports"
CRDS = [DATA / f"openreports.io_{name}.yaml" for name in ("reports", "clusterreports")]
REPORTS = "/apis/openreports.io/v1alpha1/reports"
PASS_DONE = re.compile(r"audit pass 1 done in (\d+) s")


@dataclass
class Target:
    """The scale cluster and how snapready runs on it (as ``bench.scale.serve`` starts it)."""

    plane: ControlPlane
    api: Api
    kubeconfig: Path
    """snapready's ServiceAccount (the chart's RBAC plus the report grant ``install`` adds)."""
    certs: Path
    tmp: Path
    say: Callable[[str], None]


@dataclass
class Phase:
    """One run of snapready with reports on."""

    label: str
    pass_s: float = 0.0
    objects: int = 0
    writes: dict[str, float] = field(default_factory=dict)
    cpu_s: float = 0.0
    rss_mib: float = 0.0
    etcd_growth_mib: float = 0.0

    @property
    def writes_per_minute(self) -> float:
        total = sum(v for k, v in self.writes.items() if k != "failed")
        return 60.0 * total / self.pass_s if self.pass_s else 0.0


def install(api: Api) -> None:
    """OpenReports' CRDs (Established) and the chart's report grant for snapready's account."""
    for path in CRDS:
        create(api, yaml.safe_load(path.read_text()))
    for path in CRDS:
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        crd = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"

        def established(crd: str = crd) -> bool:
            conditions = (api.json("GET", crd).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        wait(f"CRD {name} Established", established)
    rendered = render_chart(
        {"reports": {"api": "openreports"}}, release=RELEASE, namespace=RELEASE_NS
    )
    role = next(
        o for o in rendered if o["kind"] == "ClusterRole" and o["metadata"]["name"] == RELEASE
    )
    rules = [r for r in role["rules"] if "openreports.io" in r.get("apiGroups", [])]
    grant: Obj = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                  "metadata": {"name": f"{RELEASE}-reports"}, "rules": rules}  # fmt: skip
    binding: Obj = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{RELEASE}-reports"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": f"{RELEASE}-reports",
        },
        "subjects": [{"kind": "ServiceAccount", "name": RELEASE, "namespace": RELEASE_NS}],
    }
    create(api, grant)
    create(api, binding)


def report_count(api: Api) -> int:
    """Report objects in the cluster, from one one-item list (``remainingItemCount`` + 1)."""
    page = api.json("GET", f"{REPORTS}?limit=1")
    items = len(page.get("items") or [])
    return items + int((page.get("metadata") or {}).get("remainingItemCount") or 0)


def scrape(port: int) -> dict[str, float]:
    """``snapready_reports_total{action}`` and ``snapready_report_objects`` from ``/metrics``."""
    with urllib3.PoolManager() as pool:
        text = pool.request("GET", f"http://127.0.0.1:{port}/metrics", timeout=10).data.decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r'snapready_reports_total\{action="(\w+)"\} (\S+)', line)
        if match:
            found[match.group(1)] = float(match.group(2))
        elif line.startswith("snapready_report_objects "):
            found["objects"] = float(line.split()[1])
    return found


def run_phase(label: str, target: Target, timeout: float) -> Phase:
    """snapready with reports on until its first audit pass ends; what it cost."""
    plane, api, certs, say = target.plane, target.api, target.certs, target.say
    database = plane.directory / "etcd" / "member" / "snap" / "db"
    before = database.stat().st_size
    port, metrics = free_port(), free_port()
    args = ["--source", "kube", "--kubeconfig", str(target.kubeconfig), "--host", "127.0.0.1",
            "--port", str(port), "--cert-file", str(certs / "tls.crt"),
            "--key-file", str(certs / "tls.key"), "--metrics-port", str(metrics)]  # fmt: skip
    env = {"POD_NAMESPACE": RELEASE_NS, "SNAPREADY_LEADER__LEASE_NAME": RELEASE}
    server = Launcher(target.tmp, plane).snapready(f"snapready-reports-{label}", args, port, **env)
    phase = Phase(label)
    try:
        wait_ready(server, certs / "ca.crt", timeout=600, every=0.5)
        say(f"  {label}: ready; waiting for the first audit pass (writes are paced)")
        deadline = time.monotonic() + timeout
        while True:
            done = [
                PASS_DONE.search(str(e.get("msg", "")))
                for e in log_entries(server.log)
                if "audit pass 1 done" in str(e.get("msg", ""))
            ]
            if done and done[0] is not None:
                phase.pass_s = float(done[0].group(1))
                break
            if server.process.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"{label}: no audit pass within {timeout:.0f} s ({server.log})")
            time.sleep(5)
        found = scrape(metrics)
        phase.objects = report_count(api)
        phase.writes = {k: v for k, v in found.items() if k != "objects"}
        phase.cpu_s = proc.cpu_ms(server.process.pid) / 1000
        phase.rss_mib = proc.memory_mib(server.process.pid)["VmRSS"]
        phase.etcd_growth_mib = (database.stat().st_size - before) / MIB
    finally:
        stop_servers([server], plane=plane)
    say(
        f"  {label}: pass {phase.pass_s:.0f} s, {phase.objects} reports, writes {phase.writes}, "
        f"{phase.writes_per_minute:.0f}/min, CPU {phase.cpu_s:.0f} s, RSS {phase.rss_mib:.0f} MiB"
    )
    return phase


def row(phase: Phase) -> list[str]:
    """One table row."""
    writes = {k: int(phase.writes.get(k, 0)) for k in ("created", "updated", "failed")}
    return [
        phase.label,
        str(phase.objects),
        f"{phase.pass_s:.0f}",
        *(str(v) for v in writes.values()),
        f"{phase.writes_per_minute:.0f}",
        f"{phase.cpu_s:.0f}",
        f"{phase.rss_mib:.0f}",
        f"{phase.etcd_growth_mib:.0f}",
    ]


def measure_reports(target: Target, timeout: float) -> list[Phase]:
    """Both phases (module docstring); printed as a table."""
    target.say("policy reports: OpenReports CRDs and the chart's report grant on the scale cluster")
    install(target.api)
    phases = [run_phase(label, target, timeout) for label in ("first start", "restart")]
    rows = [row(p) for p in phases]
    header = ["snapready with reports", "report objects", "first pass s", "created", "updated",
              "failed", "writes/min", "CPU s (process)", "RSS MiB", "etcd +MiB"]  # fmt: skip
    print(markdown_table(header, rows))
    return phases
