"""Pod CREATE latency and cost through a real kube-apiserver (``make bench-cluster``).

Kyverno's method, scaled to one 2-core machine: a real control plane (etcd + kube-apiserver +
kube-controller-manager of ``tests/envtest/controlplane.py``, on 127.0.0.1) with GKE's Pod snapshot
CRDs, the gVisor RuntimeClass, a namespace ``bench-snap`` holding the example PodSnapshotPolicy
(``app=llm``) and its storage config, and a namespace ``bench-plain`` without policies. Pods are
created through the API server in scenarios that alternate round by round (the order reverses every
other round, so drift hits every scenario alike):

* ``none``: no webhook registered;
* ``constant``: a minimal uvicorn HTTPS server (uvloop, httptools, TLS >= 1.2, the same certificate)
  that answers ``allowed`` with the request uid echoed and no patch, registered with the chart's
  webhook configurations (same rules, failurePolicy, timeout, matchPolicy, reinvocationPolicy,
  selectors; only the ``clientConfig`` becomes ``url`` + ``caBundle``);
* ``snapready``: ``snapready serve --source kube`` with the chart's settings (defaults:
  ``injectHelpers: false``) and the chart's webhook configurations;
* ``snapready+inject``: the same with ``injectHelpers=true`` (a placeholder helpers digest: pods
  are never scheduled here, there are no nodes).

Pod kinds, each created ``--pods`` times per round at ``--concurrency`` (one urllib3 connection per
worker thread, admin client certificate): ``selected`` (the gVisor + 4 x L4 pod of review 03 with
a fresh ``generateName``), ``unselected`` (review 01's plain pod in the policy namespace) and
``plain`` (the same pod in ``bench-plain``). Every scenario starts with a dry-run probe until the
API server calls the registered server (and only it), then a warm-up; pods are deleted
(deletecollection) after every scenario so etcd stays small.

Figures per scenario and kind: p50/p90/p99 CREATE latency; CPU milliseconds per pod of the webhook
process, kube-apiserver and etcd (``/proc/<pid>/stat`` utime+stime deltas over each measured
phase); webhook calls per pod from the servers' own counters (snapready's
``snapready_admission_requests_total``, the constant server's ``/counts``), split mutate/validate;
then the ratios snapready/constant and the targets of design.md ("Targets", issue 16), each marked
met or NOT met. With ``--profile DIR``, one extra (unmeasured) phase of selected pods per snapready
variant is sampled with py-spy and summarised. No assertions: exit 0 whatever the figures.

Usage: ``python scripts/bench_cluster.py [--pods 200] [--rounds 2] [--concurrency 16] [--quick]
[--injection both|chart|on] [--scope static|dynamic] [--profile DIR] [--keep DIR]
[--timeout 1800]``
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import itertools
import json
import os
import re
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import urllib3  # noqa: E402
import yaml  # noqa: E402
from bench_admit import CACHE_FLUSH_BYTES, admit_timings, whole_pod  # noqa: E402

from tests.envtest.controlplane import (  # noqa: E402
    ControlPlane,
    ProcessRecord,
    find_assets,
    start_time,
    start_with_retries,
    stop_processes,
)
from tests.envtest.controlplane import free_port as _free_port  # noqa: E402
from tests.support import kube_raw  # noqa: E402
from tests.support.helm_support import settings_of  # noqa: E402
from tests.support.snapready_proc import ca_bundle, generate_certs  # noqa: E402
from tests.support.webhooks import WEBHOOK_KINDS, point_at, render_chart  # noqa: E402

REVIEWS = ROOT / "tests" / "data" / "reviews"
CRDS = ROOT / "tests" / "data" / "crds" / "podsnapshot.gke.io.yaml"
EXAMPLE_POLICIES = ROOT / "manifests" / "examples" / "policies.yaml"
POLICY_NS = "bench-snap"
RELEASE = RELEASE_NS = "snapready"
"""The chart's release name and namespace (its Lease lives there; both webhooks exclude it)."""
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
PLAIN_NS = "bench-plain"
KINDS = (
    ("selected", POLICY_NS, "gVisor + 4 x L4 pod (review 03), selected by llm-policy"),
    ("unselected", POLICY_NS, "plain pod (review 01) in the policy namespace, not selected"),
    ("plain", PLAIN_NS, "plain pod (review 01) in a namespace without policies"),
)
INJECT_DIGEST = "sha256:" + "5e" * 32
"""Placeholder helpers digest for ``injectHelpers=true`` (the chart refuses all zeros)."""
REQUEST_TIMEOUT = 30.0
PROFILE_RATE = 200
SPEC_HASH = "snapready.io/spec-hash"

# Targets of ../shared/docs/design.md "Targets" (issue 16).
TARGET_CALLS_PER_SELECTED = 1.0
TARGET_WEBHOOK_CPU_MS = 1.2
TARGET_APISERVER_RATIO = 1.3
TARGET_P50_RATIO = 1.3
TARGET_P99_RATIO = 1.5
TARGET_UNSELECTED_PER_1000 = 0.0

Obj = dict[str, Any]


# --------------------------------------------------------------------------------------------
# The constant-response webhook (run as ``bench_cluster.py --constant-server PORT CERT KEY``)


def constant_app_factory() -> Callable[..., Any]:
    """ASGI app: POST answers ``allowed`` for the request's uid, no patch; ``GET /counts`` returns
    the POSTs seen per path (the server's own call counter)."""
    import orjson  # noqa: PLC0415

    counts: Counter[str] = Counter()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        if scope["method"] == "GET":
            body = orjson.dumps(dict(counts))
        else:
            counts[scope["path"]] += 1
            review = orjson.loads(b"".join(chunks))
            body = orjson.dumps(
                {
                    "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
                    "kind": "AdmissionReview",
                    "response": {"uid": review["request"]["uid"], "allowed": True},
                }
            )
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def run_constant_server(port: int, cert: str, key: str) -> None:
    """Serve the constant app like ``snapready serve`` (uvloop, httptools, TLS >= 1.2)."""
    import uvicorn  # noqa: PLC0415

    config = uvicorn.Config(
        constant_app_factory(),
        host="127.0.0.1",
        port=port,
        ssl_certfile=cert,
        ssl_keyfile=key,
        loop="uvloop",
        http="httptools",
        log_config=None,
        access_log=False,
        server_header=False,
        lifespan="off",
        timeout_keep_alive=65,
    )
    config.load()
    assert config.ssl is not None
    config.ssl.minimum_version = ssl.TLSVersion.TLSv1_2
    uvicorn.Server(config).run()


# --------------------------------------------------------------------------------------------
# Load client over urllib3 (admin client certificate); set-up goes through tests/support/kube_raw


class Api:
    """JSON requests to the API server; one pool of ``size`` keep-alive connections."""

    def __init__(self, plane: ControlPlane, size: int) -> None:
        host, port = plane.url.removeprefix("https://").split(":")
        self.pool = urllib3.HTTPSConnectionPool(
            host,
            int(port),
            maxsize=size,
            block=True,
            ssl_context=plane.ssl_context(),
            retries=False,
            timeout=urllib3.Timeout(connect=5, read=REQUEST_TIMEOUT),
        )

    def call(self, method: str, path: str, body: Obj | bytes | None = None) -> tuple[int, bytes]:
        """(status, body) of one request."""
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        response = self.pool.request(method, path, body=data, headers=headers)
        return response.status, response.data

    def json(
        self, method: str, path: str, body: Obj | None = None, ok: tuple[int, ...] = ()
    ) -> Obj:
        """The decoded answer; fails on a status outside 2xx and ``ok``."""
        status, data = self.call(method, path, body)
        if not (200 <= status < 300 or status in ok):
            raise SystemExit(f"{method} {path}: HTTP {status}: {data[:500]!r}")
        decoded: Obj = json.loads(data) if data else {}
        return decoded

    def close(self) -> None:
        self.pool.close()


def exists(api: Api, path: str) -> bool:
    """Whether GET ``path`` answers 200."""
    return api.call("GET", path)[0] == 200


def empty(api: Api, path: str) -> bool:
    """Whether the list at ``path`` has no items."""
    return not api.json("GET", path)["items"]


def wait(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll ``check`` every 0.1 s until true; exit after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


# --------------------------------------------------------------------------------------------
# Cluster set-up


def create(admin: Any, obj: Obj) -> None:
    """Create ``obj`` (any kind, found by discovery); an existing one is left as it is."""
    reply = kube_raw.create(admin, obj)
    if not reply.ok and reply.status != 409:
        raise SystemExit(f"creating {obj['kind']}/{obj['metadata']['name']}: {reply.body}")


def set_up_cluster(admin: Any, api: Api) -> None:
    """CRDs, the gVisor RuntimeClass, the namespaces, the example policy and storage config."""
    crds = [doc for doc in yaml.safe_load_all(CRDS.read_text()) if doc]
    for crd in crds:
        create(admin, crd)

    def established() -> bool:
        for crd in crds:
            path = (
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
            )
            status = api.json("GET", path).get("status") or {}
            conditions = status.get("conditions") or []  # null right after the create
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
        return True

    wait("the CRDs to be Established", established)
    create(
        admin,
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "gvisor"},
            "handler": "gvisor",
            "scheduling": {  # as GKE Sandbox installs it
                "nodeSelector": {"sandbox.gke.io/runtime": "gvisor"},
                "tolerations": [
                    {
                        "key": "sandbox.gke.io/runtime",
                        "operator": "Equal",
                        "value": "gvisor",
                        "effect": "NoSchedule",
                    }
                ],
            },
        },
    )
    for namespace in (POLICY_NS, PLAIN_NS, RELEASE_NS):
        create(admin, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for doc in yaml.safe_load_all(EXAMPLE_POLICIES.read_text()):
        if doc:
            if doc["kind"] == "PodSnapshotPolicy":
                doc["metadata"]["namespace"] = POLICY_NS
            create(admin, doc)
    for namespace in (POLICY_NS, PLAIN_NS, RELEASE_NS):  # the ServiceAccount plugin needs it
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/default"
        wait(f"ServiceAccount {namespace}/default", partial(exists, api, path))


def install_identity(admin: Any, plane: ControlPlane, objs: list[Obj], tmp: Path) -> Path:
    """The chart's ServiceAccount and RBAC objects; a kubeconfig with a token of that account
    (snapready runs with exactly the permissions an install gives it, not as admin)."""
    account = next(obj for obj in objs if obj["kind"] == "ServiceAccount")
    for obj in objs:
        if obj["kind"] in {"ServiceAccount", *RBAC_KINDS}:
            create(admin, obj)
    name = account["metadata"]["name"]
    reply = kube_raw.request(
        admin,
        "POST",
        f"/api/v1/namespaces/{RELEASE_NS}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"expirationSeconds": 6 * 3600}},
    )  # fmt: skip
    if not reply.ok:
        raise SystemExit(f"TokenRequest for {RELEASE_NS}/{name}: {reply.body}")
    token: str = reply.body["status"]["token"]
    return plane.token_kubeconfig(tmp / "snapready.kubeconfig", token, namespace=RELEASE_NS)


def creatable(review_prefix: str, namespace: str) -> Obj:
    """The pod of a captured review as a client would send it: fresh ``generateName``, no API
    server additions (service-account token volume and mounts, kubectl bookkeeping)."""
    review = json.loads(next(REVIEWS.glob(f"{review_prefix}-*.json")).read_text())
    pod: Obj = copy.deepcopy(review["request"]["object"])
    name = pod["metadata"]["name"]
    pod["metadata"] = {
        "generateName": f"{name}-",
        "namespace": namespace,
        "labels": pod["metadata"].get("labels", {}),
    }
    spec = pod["spec"]
    spec.pop("serviceAccount", None)
    spec.pop("nodeName", None)
    spec["volumes"] = [v for v in spec.get("volumes", []) if not is_token(v["name"])]
    if not spec["volumes"]:
        del spec["volumes"]
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        mounts = [m for m in container.get("volumeMounts", []) if not is_token(m["name"])]
        container["volumeMounts"] = mounts
        if not mounts:
            del container["volumeMounts"]
    pod.pop("status", None)
    return pod


def is_token(volume_name: str) -> bool:
    """The projected service-account token volume the API server adds."""
    return volume_name.startswith("kube-api-access-")


# --------------------------------------------------------------------------------------------
# Webhook configurations from the chart


def chart_objects(inject: bool) -> list[Obj]:
    """The chart rendered with its defaults (``inject``: ``injectHelpers=true`` too)."""
    values: Obj = {}
    if inject:
        values = {"injectHelpers": True, "helpersImage": {"digest": INJECT_DIGEST}}
    return render_chart(values, release=RELEASE, namespace=RELEASE_NS)


def webhook_configs(objs: list[Obj], port: int, ca: str) -> list[Obj]:
    """The chart's two webhook configurations, pointed at ``https://127.0.0.1:port``."""
    url = f"https://127.0.0.1:{port}"
    configs = [point_at(obj, url, ca) for obj in objs if obj["kind"] in WEBHOOK_KINDS]
    assert len(configs) == 2, "the chart renders one mutating and one validating configuration"
    return configs


ADMISSION_API = "/apis/admissionregistration.k8s.io/v1"
CONFIG_PATHS = {
    "MutatingWebhookConfiguration": f"{ADMISSION_API}/mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": f"{ADMISSION_API}/validatingwebhookconfigurations",
}


def live_conditions(api: Api) -> dict[str, list[Obj]]:
    """``matchConditions`` of every registered webhook, by webhook name."""
    found: dict[str, list[Obj]] = {}
    for path in CONFIG_PATHS.values():
        for item in api.json("GET", path).get("items", []):
            for hook in item.get("webhooks", []):
                found[hook["name"]] = hook.get("matchConditions") or []
    return found


def register(api: Api, configs: list[Obj], conditions: dict[str, list[Obj]]) -> None:
    """Replace every webhook configuration by ``configs`` (none: unregister), each webhook with
    the ``matchConditions`` snapready's scope controller wrote (``conditions``, by name)."""
    for path in CONFIG_PATHS.values():
        for item in api.json("GET", path).get("items", []):
            api.json("DELETE", f"{path}/{item['metadata']['name']}", ok=(404,))
    for config in configs:
        scoped = copy.deepcopy(config)
        for hook in scoped["webhooks"]:
            if conditions.get(hook["name"]):
                hook["matchConditions"] = conditions[hook["name"]]
        api.json("POST", CONFIG_PATHS[scoped["kind"]], scoped)


# --------------------------------------------------------------------------------------------
# Servers, counters and CPU


@dataclass
class Server:
    """A webhook server process of the bench."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    configs: list[Obj]
    counts: Callable[[], dict[str, float]]
    """Calls answered so far, by ``mutate``/``validate`` (the server's own counter)."""
    log: Path


def spawn(
    plane: ControlPlane, name: str, argv: list[str], log: Path, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """Start a process in its own session, recorded in the control plane's descriptor so that its
    watchdog stops it too if this script dies without cleaning up."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("SNAPREADY_", "KUBE"))}
    with log.open("wb") as output:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**inherited, **env},
            start_new_session=True,
        )
    plane.processes.append(ProcessRecord(name, process.pid, start_time(process.pid), str(log)))
    plane.save()
    return process


def https_get(port: int, path: str, ca: Path, timeout: float = 2.0) -> tuple[int, bytes]:
    """GET over HTTPS to 127.0.0.1, trusting ``ca``."""
    with urllib3.HTTPSConnectionPool(
        "127.0.0.1", port, ca_certs=str(ca), cert_reqs="CERT_REQUIRED", retries=False
    ) as pool:
        response = pool.request("GET", path, timeout=timeout)
        return response.status, response.data


def wait_server(server: Server, path: str, ca: Path, timeout: float = 90.0) -> None:
    """Wait until ``path`` answers 200 (snapready: ``/readyz``: caches synced, scope written)."""
    last = b""

    def up() -> bool:
        nonlocal last
        if server.process.poll() is not None:
            log = server.log.read_text(errors="replace")[-3000:]
            raise SystemExit(f"{server.name} exited with {server.process.returncode}:\n{log}")
        try:
            status, last = https_get(server.port, path, ca)
        except urllib3.exceptions.HTTPError:
            return False
        return status == 200

    try:
        wait(f"{server.name} on port {server.port}", up, timeout)
    except SystemExit as error:
        raise SystemExit(f"{error}; last {path}: {last[:600]!r}; log {server.log}") from None


METRIC_LINE = re.compile(r"^snapready_admission_requests_total\{([^}]*)\}\s+(\S+)$", re.MULTILINE)


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
    """The constant server's own POST counter, by path."""
    counts: dict[str, float] = json.loads(https_get(port, "/counts", ca, timeout=5)[1])
    return {path.strip("/"): value for path, value in counts.items()}


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_ms(pid: int) -> float:
    """utime + stime of ``pid`` (all its threads) in milliseconds; 0 when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / TICKS


def machine_busy_ms() -> float:
    """CPU time spent by the whole machine (every CPU, not idle or iowait), in milliseconds."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    busy = sum(values[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy * 1000 / TICKS


# --------------------------------------------------------------------------------------------
# Load


@dataclass
class Phase:
    """What one measured phase (one scenario, kind and round) produced."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pods: int = 0
    wall_ms: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU milliseconds by process: webhook, apiserver, etcd, kcm, client; ``other``: the rest
    of the machine (other users' processes)."""
    calls: dict[str, float] = field(default_factory=dict)


def create_pods(
    api: Api, namespace: str, body: bytes, count: int, *, concurrency: int, stop: threading.Event
) -> tuple[list[float], list[str]]:
    """POST ``count`` pods with ``concurrency`` threads; (seconds per created pod, errors)."""
    latencies: list[float] = []
    errors: list[str] = []
    tickets = itertools.count()
    path = f"/api/v1/namespaces/{namespace}/pods"

    def worker() -> None:
        while not stop.is_set() and next(tickets) < count:
            started = time.perf_counter()
            try:
                status, data = api.call("POST", path, body)
            except urllib3.exceptions.HTTPError as error:
                errors.append(f"{type(error).__name__}: {error}")
                continue
            elapsed = time.perf_counter() - started
            if status == 201:
                latencies.append(elapsed)
            else:
                errors.append(f"HTTP {status}: {data[:300]!r}")

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)  # short joins: Ctrl-C is seen
    return latencies, errors


def delete_pods(api: Api) -> None:
    """deletecollection in both namespaces; wait until they are empty (no nodes: immediate)."""
    for namespace in (POLICY_NS, PLAIN_NS):
        api.json("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
    for namespace in (POLICY_NS, PLAIN_NS):
        path = f"/api/v1/namespaces/{namespace}/pods?limit=1"
        wait(f"pods of {namespace} deleted", partial(empty, api, path))


# --------------------------------------------------------------------------------------------
# The bench


@dataclass
class Bench:
    """Everything the scenarios share."""

    plane: ControlPlane
    api: Api
    admin: Any
    servers: dict[str, Server]
    bodies: dict[str, tuple[str, bytes]]
    concurrency: int
    deadline: float
    stop: threading.Event
    probe_log: dict[str, Obj] = field(default_factory=dict)

    conditions: dict[str, list[Obj]] = field(default_factory=dict)
    """``matchConditions`` by webhook name, as snapready's scope controller wrote them."""
    scope_seen: dict[str, str] = field(default_factory=dict)

    def pid(self, name: str) -> int:
        return next(r.pid for r in self.plane.processes if r.name == name)

    def all_counts(self) -> dict[str, dict[str, float]]:
        return {name: server.counts() for name, server in self.servers.items()}

    def activate(self, scenario: str) -> None:
        """Register ``scenario``'s webhook configurations; wait until the API server calls that
        server for both webhooks and no other server (a dry-run probe of a selected pod)."""
        server = self.servers.get(scenario)
        register(self.api, server.configs if server else [], self.conditions)
        namespace, body = self.bodies["selected"]
        path = f"/api/v1/namespaces/{namespace}/pods?dryRun=All"
        quiet = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            before = self.all_counts()
            status, data = self.api.call("POST", path, body)
            after = self.all_counts()
            moved = {
                name: {k: after[name].get(k, 0) - before[name].get(k, 0) for k in after[name]}
                for name in after
            }
            others = any(v > 0 for n, d in moved.items() if n != scenario for v in d.values())
            if server is None:
                quiet = 0 if others else quiet + 1
                if quiet >= 3:
                    self.scope_seen[scenario] = "no webhook configuration"
                    return
            elif (
                not others
                and moved[scenario].get("mutate", 0) > 0
                and moved[scenario].get("validate", 0) > 0
            ):
                if status != 201:
                    raise SystemExit(f"{scenario}: the probe pod was refused: {data[:800]!r}")
                self.probe_log[scenario] = json.loads(data)
                live = live_conditions(self.api)
                self.scope_seen[scenario] = "; ".join(
                    f"{hook}: {', '.join(c['name'] for c in conds) or 'none'}"
                    for hook, conds in sorted(live.items())
                )
                return
            time.sleep(0.2)
        raise SystemExit(f"the API server did not switch to scenario {scenario} within 60 s")

    def cpu_now(self, scenario: str) -> dict[str, float]:
        """CPU ms so far of the processes that matter, plus ``bench`` (all of this bench's
        processes) and ``machine`` (every CPU of the machine)."""
        pids = {
            "apiserver": self.pid("kube-apiserver"),
            "etcd": self.pid("etcd"),
            "kcm": self.pid("kube-controller-manager"),
            "client": os.getpid(),
        }
        if scenario in self.servers:
            pids["webhook"] = self.servers[scenario].process.pid
        now = {name: cpu_ms(pid) for name, pid in pids.items()}
        mine = {record.pid for record in self.plane.processes} | {os.getpid()}
        now["bench"] = sum(cpu_ms(pid) for pid in mine)
        now["machine"] = machine_busy_ms()
        return now

    def measure(self, scenario: str, kind: str, count: int) -> Phase:
        """Create ``count`` pods of ``kind``; latencies, CPU and webhook call deltas."""
        if time.monotonic() > self.deadline:
            raise SystemExit("--timeout reached")
        namespace, body = self.bodies[kind]
        server = self.servers.get(scenario)
        calls_before = server.counts() if server else {}
        cpu_before = self.cpu_now(scenario)
        started = time.monotonic()
        latencies, errors = create_pods(
            self.api, namespace, body, count, concurrency=self.concurrency, stop=self.stop
        )
        wall_ms = (time.monotonic() - started) * 1000
        cpu_after = self.cpu_now(scenario)
        calls_after = server.counts() if server else {}
        cpu = {name: cpu_after[name] - cpu_before[name] for name in cpu_after}
        cpu["other"] = max(0.0, cpu.pop("machine") - cpu.pop("bench"))
        return Phase(
            latencies=latencies,
            errors=errors,
            pods=len(latencies),
            wall_ms=wall_ms,
            cpu=cpu,
            calls={k: calls_after.get(k, 0) - calls_before.get(k, 0) for k in calls_after},
        )


@dataclass
class Totals:
    """One scenario and kind, summed over rounds."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pods: int = 0
    wall_ms: float = 0.0
    cpu: Counter[str] = field(default_factory=Counter)
    calls: Counter[str] = field(default_factory=Counter)

    def add(self, phase: Phase) -> None:
        self.latencies += phase.latencies
        self.errors += phase.errors
        self.pods += phase.pods
        self.wall_ms += phase.wall_ms
        self.cpu.update(phase.cpu)
        self.calls.update(phase.calls)

    def pct(self, q: int) -> float:
        """Percentile ``q`` (1-99) of the latencies, in ms."""
        if len(self.latencies) < 2:
            return self.latencies[0] * 1000 if self.latencies else float("nan")
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[q - 1] * 1000

    def per_pod(self, value: float) -> float:
        return value / self.pods if self.pods else float("nan")


def run_bench(
    bench: Bench, scenarios: list[str], pods: int, rounds: int
) -> dict[tuple[str, str], Totals]:
    """Alternating rounds over ``scenarios``; the totals per (scenario, kind)."""
    totals: dict[tuple[str, str], Totals] = defaultdict(Totals)
    warmup = min(pods, 2 * bench.concurrency)
    for number in range(rounds):
        order = scenarios if number % 2 == 0 else list(reversed(scenarios))
        for scenario in order:
            started = time.monotonic()
            bench.activate(scenario)
            namespace, body = bench.bodies["selected"]
            create_pods(
                bench.api, namespace, body, warmup, concurrency=bench.concurrency, stop=bench.stop
            )
            for kind, _, _ in KINDS:
                totals[scenario, kind].add(bench.measure(scenario, kind, pods))
            delete_pods(bench.api)
            sel = totals[scenario, "selected"]
            print(
                f"  round {number + 1}/{rounds} {scenario:<17} done in "
                f"{time.monotonic() - started:5.1f} s (selected so far: p50 {sel.pct(50):.1f} ms)",
                flush=True,
            )
    return dict(totals)


# --------------------------------------------------------------------------------------------
# Profiling (py-spy)


def profile_phase(bench: Bench, scenario: str, pods: int, out: Path) -> Path | None:
    """Sample ``scenario``'s server with py-spy while ``pods`` selected pods are created."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print(f"  py-spy not found: no profile of {scenario} (pip install py-spy)")
        return None
    bench.activate(scenario)
    namespace, body = bench.bodies["selected"]
    create_pods(bench.api, namespace, body, 64, concurrency=bench.concurrency, stop=bench.stop)
    raw = out / f"{scenario}.collapsed.txt"
    pid = bench.servers[scenario].process.pid
    recorder = subprocess.Popen(
        [
            spy,
            "record",
            "--pid",
            str(pid),
            "--rate",
            str(PROFILE_RATE),
            "--format",
            "raw",
            "--threads",
            "--native",
            "-o",
            str(raw),
        ],
        stdout=subprocess.DEVNULL,
        stderr=(out / f"{scenario}.py-spy.log").open("wb"),
        start_new_session=True,
    )
    try:
        time.sleep(1.5)  # attached
        create_pods(
            bench.api, namespace, body, pods, concurrency=bench.concurrency, stop=bench.stop
        )
        time.sleep(0.3)
    finally:
        recorder.send_signal(signal.SIGINT)
        try:
            recorder.wait(30)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.wait(5)
    delete_pods(bench.api)
    return raw if raw.exists() else None


FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")
IDLE_LEAVES = ("epoll_wait", "epoll_pwait", "poll", "select", "futex", "nanosleep", "0x")
"""Leaf frames of a thread waiting in the kernel (an unresolved libc address is a futex wait)."""


def summarise_profile(raw: Path, top: int = 20) -> str:
    """Where the event-loop thread's CPU goes, from py-spy raw stacks (``--threads --native``).

    Only MainThread samples whose leaf is not a kernel wait (epoll, poll, futex) count: that is
    the thread serving admissions (the cache, leader, scope and metrics threads are reported as
    one figure). Frames are grouped by function and file, without line numbers.
    """
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    busy_threads: Counter[str] = Counter()
    active = idle = others_active = others_idle = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        thread, *frames = stack.split(";")
        leaf = frames[-1] if frames else ""
        waiting = leaf.startswith(IDLE_LEAVES)
        if "MainThread" not in thread:
            if waiting:
                others_idle += count
            else:
                others_active += count
                busy_threads[thread.split(": ", 1)[-1]] += count
            continue
        if waiting:
            idle += count
            continue
        active += count
        names = [short_frame(frame) for frame in frames]
        for name in set(names):
            inclusive[name] += count
        own[names[-1]] += count
        areas[area(frames[-1])] += count
    if not active:
        return f"{raw}: no active samples of the event-loop thread"
    lines = [
        f"event-loop thread: {active} busy samples, {idle} waiting (epoll); other threads: "
        f"{others_active} busy, {others_idle} waiting (py-spy --native, {PROFILE_RATE} Hz)",
        "",
        "inclusive, Python frames (% of the event-loop thread's busy samples; frames in >= 95% "
        "omitted: the event loop itself):",
    ]
    below_loop = [
        (name, n)
        for name, n in inclusive.most_common()
        if n < 0.95 * active and ".py)" in name  # Python frames: the native ones are the loop
    ]
    lines += [f"  {100 * n / active:5.1f}%  {name}" for name, n in below_loop[:top]]
    lines += ["", "self (leaf frame, native frames included):"]
    lines += [f"  {100 * n / active:5.1f}%  {name}" for name, n in own.most_common(top)]
    lines += ["", "self by area:"]
    lines += [f"  {100 * n / active:5.1f}%  {name}" for name, n in areas.most_common(16)]
    lines += ["", "busy samples of the other threads (vs the event loop's):"]
    lines += [f"  {n:6d}  {name}" for name, n in busy_threads.most_common(5)]
    return "\n".join(lines)


def short_frame(frame: str) -> str:
    """``func (path/file.py:12)`` -> ``func (path/file.py)``."""
    match = FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    return f"{match.group('func')} ({match.group('file')})"


def area(frame: str) -> str:
    """A coarse owner of a leaf frame: a webhook folder, a library, or the runtime."""
    match = FRAME.match(frame.strip())
    path = match.group("file") if match else frame
    if path.startswith("webhook/"):
        return "/".join(path.split("/")[:2])
    for marker, name in (
        ("libcrypto", "OpenSSL (libcrypto)"),
        ("libssl", "OpenSSL (libssl)"),
        ("_ssl.c", "CPython _ssl"),
        ("loop.c", "uvloop"),
        ("uv", "libuv"),
        ("orjson", "orjson"),
        ("pydantic_core", "pydantic-core"),
        ("httptools", "httptools"),
        ("libc.so", "libc (syscalls)"),
        ("libpython", "CPython runtime"),
    ):
        if marker in path:
            return name
    if path.endswith((".c", ".h")):
        return "CPython runtime"
    return path.split("/", 1)[0] if "/" in path else path


# --------------------------------------------------------------------------------------------
# Report


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def report(
    totals: dict[tuple[str, str], Totals],
    scenarios: list[str],
    *,
    args: argparse.Namespace,
    versions: str,
    bench: Bench,
) -> None:
    """Print the per-scenario tables, the ratios and the targets."""
    print(
        f"\nsnapready bench-cluster: {versions} on 127.0.0.1, {os.cpu_count()} CPUs shared by "
        f"everything (API server, etcd, controller-manager, webhook, load generator);\n"
        f"{args.pods} pods x {args.rounds} rounds per scenario and pod kind, {args.concurrency} "
        f"concurrent creates, scenarios alternating (order reversed every other round); "
        f"snapready scope.mode {args.scope or 'from the chart'}."
    )
    print("webhook configurations in force (matchConditions per webhook):")
    for scenario in scenarios:
        print(f"  {scenario:<18}{bench.scope_seen.get(scenario, '?')}")
    for kind, namespace, description in KINDS:
        print(f"\n{kind} pods: {description} (namespace {namespace})")
        print(
            f"{'':<18}{'':>5}{'':>4}{'latency ms':>25}  {'CPU ms per pod':<38}"
            f"{'calls per pod':>17}{'other':>7}"
        )
        print(
            f"{'scenario':<18}{'pods':>5}{'err':>4}{'p50':>8}{'p90':>8}{'p99':>9}  "
            f"{'webhook':>8}{'apisrv':>7}{'etcd':>6}{'kcm':>6}{'client':>7}"
            f"{'mutate':>11}{'validate':>9}{'cores':>7}"
        )
        for scenario in scenarios:
            t = totals[scenario, kind]
            hook = scenario != "none"
            webhook = f"{t.per_pod(t.cpu['webhook']):.2f}" if hook else "-"
            mutate = f"{t.per_pod(t.calls['mutate']):.2f}" if hook else "-"
            validate = f"{t.per_pod(t.calls['validate']):.2f}" if hook else "-"
            other = t.cpu["other"] / t.wall_ms if t.wall_ms else float("nan")
            print(
                f"{scenario:<18}{t.pods:>5}{len(t.errors):>4}{t.pct(50):>8.1f}{t.pct(90):>8.1f}"
                f"{t.pct(99):>9.1f}  {webhook:>8}{t.per_pod(t.cpu['apiserver']):>7.2f}"
                f"{t.per_pod(t.cpu['etcd']):>6.2f}{t.per_pod(t.cpu['kcm']):>6.2f}"
                f"{t.per_pod(t.cpu['client']):>7.2f}{mutate:>11}{validate:>9}{other:>7.2f}"
            )
    print(
        "\n(CPU from /proc/<pid>/stat utime+stime over each measured phase, 10 ms ticks; 'client' "
        "is this script's load generator; 'other cores': CPU used meanwhile by processes outside "
        "the bench, e.g. other test runs: noise.)"
    )
    errors = [(key, e) for key, t in totals.items() for e in t.errors]
    if errors:
        print(f"\n{len(errors)} failed creates, first ones:")
        for (scenario, kind), error in errors[:5]:
            print(f"  {scenario}/{kind}: {error}")

    base = totals.get(("constant", "selected"))
    ours = [s for s in scenarios if s.startswith("snapready")]
    if base is not None and ours:
        print("\nratios snapready/constant, selected pods:")
        print(f"{'scenario':<18}{'p50':>8}{'p99':>8}{'webhook CPU':>13}{'apiserver CPU':>15}")
        for scenario in ours:
            t = totals[scenario, "selected"]
            print(
                f"{scenario:<18}{t.pct(50) / base.pct(50):>8.2f}{t.pct(99) / base.pct(99):>8.2f}"
                f"{t.per_pod(t.cpu['webhook']) / base.per_pod(base.cpu['webhook']):>13.2f}"
                f"{t.per_pod(t.cpu['apiserver']) / base.per_pod(base.cpu['apiserver']):>15.2f}"
            )

    report_targets(totals, ours, base, bench)


def report_targets(
    totals: dict[tuple[str, str], Totals], ours: list[str], base: Totals | None, bench: Bench
) -> None:
    """Print each target of design.md with the measured value and a verdict; then the
    mutating-webhook rounds per selected pod."""
    print('\ntargets (design.md "Targets", issue 16):')
    print(f"{'target':<56}{'scenario':<18}{'measured':>9}  {'target':<9}verdict")

    def row(name: str, scenario: str, measured: float, target: str, ok: bool) -> None:
        print(f"{name:<56}{scenario:<18}{measured:>9.2f}  {target:<9}{verdict(ok)}")

    for scenario in ours:
        t = totals[scenario, "selected"]
        mutate, validate = t.per_pod(t.calls["mutate"]), t.per_pod(t.calls["validate"])
        row("mutating calls per selected pod", scenario, mutate, "= 1", abs(mutate - 1) < 0.005)
        row("validating calls per selected pod", scenario, validate, "= 1",
            abs(validate - 1) < 0.005)  # fmt: skip
        cpu = t.per_pod(t.cpu["webhook"])
        row(
            "webhook CPU ms per selected pod", scenario, cpu, "<= 1.2", cpu <= TARGET_WEBHOOK_CPU_MS
        )
        if base is not None:
            ratio = t.per_pod(t.cpu["apiserver"]) / base.per_pod(base.cpu["apiserver"])
            row("apiserver CPU per selected pod / constant's", scenario, ratio, "<= 1.3",
                ratio <= TARGET_APISERVER_RATIO)  # fmt: skip
            p50, p99 = t.pct(50) / base.pct(50), t.pct(99) / base.pct(99)
            row("selected-pod CREATE p50 / constant's", scenario, p50, "<= 1.3",
                p50 <= TARGET_P50_RATIO)  # fmt: skip
            row("selected-pod CREATE p99 / constant's", scenario, p99, "<= 1.5",
                p99 <= TARGET_P99_RATIO)  # fmt: skip
        for kind in ("unselected", "plain"):
            u = totals[scenario, kind]
            per_1000 = 1000 * u.per_pod(u.calls["mutate"] + u.calls["validate"])
            row(f"webhook calls per 1,000 {kind} pods", scenario, per_1000, "= 0",
                per_1000 <= TARGET_UNSELECTED_PER_1000)  # fmt: skip

    in_process: dict[str, list[Any]] = {}
    for scenario in ours:
        # In this process, after the measured phases (the cluster is idle): scripts/bench_admit.py.
        in_process[scenario] = admit_timings(inject=scenario == "snapready+inject")
        for timing in in_process[scenario]:
            if timing.target is not None:
                row(f"in-process {timing.name}, us", scenario, timing.micros,
                    f"<= {timing.target:.0f}", timing.micros <= timing.target)  # fmt: skip
    report_where(totals, ours, base, in_process)

    print("\nmutating-webhook rounds per selected pod (snapready's mutate counter / pods created):")
    for scenario in ours:
        t = totals[scenario, "selected"]
        rounds_per_pod = t.per_pod(t.calls["mutate"])
        probe = bench.probe_log.get(scenario, {})
        spec = probe.get("spec", {})
        init = [
            f"{c['name']} (mounts: {', '.join(m['name'] for m in c.get('volumeMounts', []))})"
            for c in spec.get("initContainers", [])
        ]
        hashed = SPEC_HASH in probe.get("metadata", {}).get("annotations", {})
        note = "reinvoked: the API server called /mutate twice" if rounds_per_pod > 1.5 else "once"
        print(
            f"  {scenario:<18}{rounds_per_pod:.2f} ({note}); admitted pod: spec-hash "
            f"{'set' if hashed else 'MISSING'}, init containers: {', '.join(init) or 'none'}"
        )


def report_where(
    totals: dict[tuple[str, str], Totals],
    ours: list[str],
    base: Totals | None,
    in_process: dict[str, list[Any]],
) -> None:
    """Where a selected pod's webhook CPU goes: what any webhook pays (the constant server), and
    snapready's own work measured in this process with warm and with flushed CPU caches."""
    print("\nwhere a selected pod's webhook CPU goes (ms per pod):")
    floor = base.per_pod(base.cpu["webhook"]) if base is not None else float("nan")
    for scenario in ours:
        t = totals[scenario, "selected"]
        timings = in_process[scenario]
        hot = (2 * timings[0].micros + timings[1].micros + timings[2].micros) / 1000
        _, cold = whole_pod(inject=scenario == "snapready+inject", pods=500)
        print(
            f"  {scenario:<18}measured {t.per_pod(t.cpu['webhook']):.2f} = constant server "
            f"{floor:.2f} (TLS, HTTP, event loop: any webhook) + snapready's own "
            f"{t.per_pod(t.cpu['webhook']) - floor:.2f}; that work in-process: {hot:.2f} with "
            f"warm caches, {cold / 1000:.2f} after {CACHE_FLUSH_BYTES >> 20} MiB were read and "
            "written (other processes between two calls)"
        )


# --------------------------------------------------------------------------------------------
# Main


def start_servers(
    bench: Bench, tmp: Path, scenarios: list[str], paths: Any, scope_mode: str | None
) -> None:
    """Start the constant server and one ``snapready serve --source kube`` per variant, each
    snapready as the chart's ServiceAccount with the chart's settings file.

    The chart's webhook configurations (pointed at the first snapready) are registered before
    snapready starts: with ``scope.mode: dynamic`` its ``/readyz`` waits until the scope
    controller has written (leader) or seen (follower) the ``matchConditions`` on them. Those
    conditions are then kept for every scenario (``Bench.conditions``): the constant server is
    registered exactly like snapready."""
    plane, ca = bench.plane, ca_bundle(paths)
    charts = {False: chart_objects(False)}
    if "snapready+inject" in scenarios:
        charts[True] = chart_objects(True)
    kubeconfig = install_identity(bench.admin, plane, charts[False], tmp)
    servers = bench.servers
    if "constant" in scenarios:
        port = _free_port()
        log = tmp / "constant.log"
        argv = [sys.executable, str(Path(__file__).resolve()), "--constant-server", str(port),
                str(paths / "tls.crt"), str(paths / "tls.key")]  # fmt: skip
        process = spawn(plane, "constant", argv, log, {})
        servers["constant"] = Server(
            "constant",
            process,
            port,
            webhook_configs(charts[False], port, ca),
            partial(constant_counts, port, paths / "ca.crt"),
            log,
        )
    for scenario in scenarios:
        if not scenario.startswith("snapready"):
            continue
        objs = charts[scenario == "snapready+inject"]
        port, metrics_port = _free_port(), _free_port()
        settings = settings_of(objs)  # the chart's ConfigMap; then local paths and ports
        settings["server"].update(
            host="127.0.0.1",
            port=port,
            cert_file=str(paths / "tls.crt"),
            key_file=str(paths / "tls.key"),
            metrics_port=metrics_port,
            drain_seconds=0,
        )
        settings["source"].update(kind="kube", kubeconfig=str(kubeconfig))
        if scope_mode:
            settings.setdefault("scope", {})["mode"] = scope_mode
        config = tmp / f"{scenario}.settings.yaml"
        config.write_text(yaml.safe_dump(settings))
        log = tmp / f"{scenario}.log"
        argv = [sys.executable, "-m", "webhook", "serve", "--config", str(config), "--kubeconfig",
                str(kubeconfig)]  # fmt: skip
        env = {"SNAPREADY_CONFIG_FILE": str(config), "POD_NAMESPACE": RELEASE_NS}
        servers[scenario] = Server(
            scenario,
            spawn(plane, scenario, argv, log, env),
            port,
            webhook_configs(objs, port, ca),
            partial(snapready_counts, metrics_port),
            log,
        )
        if len([s for s in servers if s.startswith("snapready")]) == 1:
            register(bench.api, servers[scenario].configs, {})  # before readiness, see above
    for name, server in servers.items():
        wait_server(server, "/counts" if name == "constant" else "/readyz", paths / "ca.crt")
    bench.conditions = live_conditions(bench.api)


def stop_servers(plane: ControlPlane, servers: dict[str, Server]) -> None:
    """SIGTERM (then SIGKILL) the bench's servers by pid."""
    records = [r for r in plane.processes if r.name in servers]
    stop_processes(records, timeout=15)
    for server in servers.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.process.wait(1)


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


def main() -> int:
    """Parse flags, set everything up, run the scenarios, print the report, stop everything."""
    parser = argparse.ArgumentParser(
        description="Pod CREATE latency through a real kube-apiserver: none vs a constant "
        "webhook vs snapready (alternating rounds). See the module docstring.",
    )
    parser.add_argument("--pods", type=int, default=200, help="pods per kind, scenario and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="smoke run: 20 pods x 1 round")
    parser.add_argument(
        "--injection",
        choices=["both", "chart", "on"],
        default="both",
        help="snapready with the chart's defaults (injectHelpers=false), with injection on, or "
        "both (default)",
    )
    parser.add_argument("--scope", choices=["static", "dynamic"],
                        help="override the chart's scope.mode for snapready")  # fmt: skip
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="after the rounds, sample each snapready variant with py-spy during one unmeasured "
        "phase of selected pods; raw stacks and a summary in DIR",
    )
    parser.add_argument("--profile-pods", type=int, default=2000, help="pods of --profile")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="work in DIR and keep it (control plane and server logs)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=1800, help="give up after SECONDS")
    parser.add_argument("--constant-server", nargs=3, metavar=("PORT", "CERT", "KEY"),
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args()
    if args.constant_server:
        port, cert, key = args.constant_server
        run_constant_server(int(port), cert, key)
        return 0
    if args.quick:
        args.pods, args.rounds = 20, 1
    scenarios = ["none", "constant"]
    scenarios += {"both": ["snapready", "snapready+inject"], "chart": ["snapready"],
                  "on": ["snapready+inject"]}[args.injection]  # fmt: skip
    try:
        with terminated_as_interrupt():
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                return bench_in(args.keep.resolve(), args, scenarios)
            with tempfile.TemporaryDirectory(prefix="snapready-bench-cluster-") as tmp:
                return bench_in(Path(tmp), args, scenarios)
    except KeyboardInterrupt as interrupt:
        print(f"interrupted ({interrupt or 'Ctrl-C'}); every process was stopped", file=sys.stderr)
        return 130


def bench_in(tmp: Path, args: argparse.Namespace, scenarios: list[str]) -> int:
    """The whole run inside ``tmp``; every process is stopped by pid before returning."""
    began = time.monotonic()
    assets = find_assets(tmp / "envtest-build.log")
    print(f"starting the control plane ({assets})", flush=True)
    plane = start_with_retries(assets, tmp / "controlplane", tmp / "controlplane.json")
    stop = threading.Event()
    api = Api(plane, args.concurrency + 2)
    admin = plane.api_client()
    bodies = {
        "selected": (POLICY_NS, json.dumps(creatable("03", POLICY_NS)).encode()),
        "unselected": (POLICY_NS, json.dumps(creatable("01", POLICY_NS)).encode()),
        "plain": (PLAIN_NS, json.dumps(creatable("01", PLAIN_NS)).encode()),
    }
    bench = Bench(plane, api, admin, {}, bodies, args.concurrency, began + args.timeout, stop)
    try:
        print(f"[{time.monotonic() - began:.0f} s] control plane ready; setting up", flush=True)
        set_up_cluster(admin, api)
        paths = generate_certs(tmp / "certs")
        start_servers(bench, tmp, scenarios, paths, args.scope)
        version = json.loads(plane.get("/version")[1]).get("gitVersion", "?")
        etcd = subprocess.run(
            [str(assets / "etcd"), "--version"], capture_output=True, text=True, check=False
        ).stdout.split("\n", 1)[0]
        tree = subprocess.run(
            ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=False
        ).stdout.strip()
        versions = (
            f"snapready tree {tree or '?'}, kube-apiserver {version} + "
            f"{etcd.replace('Version: ', '')}"
        )
        print(
            f"[{time.monotonic() - began:.0f} s] servers up; {versions}; measuring "
            f"{', '.join(scenarios)}",
            flush=True,
        )
        totals = run_bench(bench, scenarios, args.pods, args.rounds)
        report(totals, scenarios, args=args, versions=versions, bench=bench)
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            for scenario in [s for s in scenarios if s.startswith("snapready")]:
                raw = profile_phase(bench, scenario, args.profile_pods, args.profile.resolve())
                if raw is not None:
                    summary = summarise_profile(raw)
                    (args.profile / f"{scenario}.summary.txt").write_text(summary + "\n")
                    print(f"\npy-spy profile of {scenario}, {args.profile_pods} selected pods "
                          f"(raw stacks: {raw}):\n{summary}")  # fmt: skip
        print(f"\ntotal wall time {time.monotonic() - began:.0f} s")
        return 0
    finally:
        stopping = time.monotonic()
        stop.set()
        with contextlib.suppress(Exception):
            register(api, [], {})
        api.close()
        admin.close()  # type: ignore[no-untyped-call]
        stop_servers(plane, bench.servers)
        servers_stopped = time.monotonic()
        plane.stop(remove=not args.keep)
        print(
            f"stopped every process by pid: servers in {servers_stopped - stopping:.1f} s, "
            f"control plane in {time.monotonic() - servers_stopped:.1f} s",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
