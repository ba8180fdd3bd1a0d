"""``snapready status`` and ``snapready explain`` against a real API server.

The scenario is simulated the way GKE acts on a cluster (as in ``tests/cluster/controllers/``):
a Node of pool ``l4-*`` with GKE labels and a kubelet version, the ``gvisor`` RuntimeClass, a
grouped PodSnapshotPolicy, an origin pod admitted through snapready's engine and created, a
PodSnapshot naming it made Ready through the status subresource, and a snapready cluster source
(leader) writing the origin record. Later pods are admitted by the same engine (so they carry the
admission-time prediction annotations), created, and given PodScheduled / Ready / PodRestored
conditions and container statuses through ``pods/status``, the way GKE's agent reports them
(docs/gke-facts.md#section-9: a restored pod is Ready seconds after scheduling and PodRestored tens
of seconds later); GKE's own ``GKEPodSnapshotting`` core/v1 Events are created on the pods, and
PodSnapshots go through the ``Checkpoint`` condition sequence. Times are set in the past relative
to now (``ago``) so that ``outcomes.settle_seconds`` (300 s) has passed, or has not, as each test
needs. The commands run as subprocesses (``snapready status --kubeconfig ...``) or in-process
(``webhook.cli.main``).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.conftest import make_settings
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import service_account_token, wait_for
from tests.support.identity import IdentityFactory, require_token
from tests.support.kube_real import create_policy, policy
from tests.support.ports import free_port
from webhook.admission.engine import Engine, admit
from webhook.cli import main
from webhook.cli.common.output import age_text
from webhook.cli.explain.hints import field_entry
from webhook.cluster.api.transport import KubeTransport
from webhook.cluster.manager import Cluster, start_cluster
from webhook.kube.review import AdmissionRequest

GROUP, VERSION = "podsnapshot.gke.io", "v1"
OLD, NEW = "v1.35.3-gke.1234000", "v1.35.4-gke.100"
IMAGE = "registry.example/llm@sha256:" + "ab" * 32
SNAPREADY = Path(sys.executable).with_name("snapready")


@dataclass
class Scenario:
    """One test's cluster: namespace, pool and node, the admin kubeconfig (the operator running
    the CLI), snapready running as its ServiceAccount with the chart's RBAC, and ``gke``: GKE's
    snapshot controller, the only identity GKE's guard lets write PodSnapshots."""

    api: client.ApiClient
    kubeconfig: Path
    namespace: str
    pool: str
    node: str
    source: Cluster
    engine: Engine
    gke: client.ApiClient

    def pod(self, name: str, image: str = IMAGE, model: str = "m1") -> dict[str, Any]:
        """A selected gVisor L4 pod pinned to the pool."""
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {"app": "llm", "model": model},
            },
            "spec": {
                "runtimeClassName": "gvisor",
                "nodeSelector": {"cloud.google.com/gke-nodepool": self.pool},
                "containers": [
                    {
                        "name": "server",
                        "image": image,
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
            },
        }

    def create(self, pod: dict[str, Any], node: str | None = None) -> dict[str, Any]:
        """Admit ``pod`` through snapready's mutating webhook, then create it; the live pod."""
        request = AdmissionRequest.model_validate(
            {
                "uid": secrets.token_hex(4),
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "namespace": self.namespace,
                "operation": "CREATE",
                "object": pod,
            }
        )
        decision = admit(request, "mutate", self.engine)
        assert decision.allowed, decision.message
        admitted = jsonpatch.apply_patch(pod, list(decision.patch))
        if node is not None:
            admitted["spec"]["nodeName"] = node
        core = client.CoreV1Api(self.api)
        created = core.create_namespaced_pod(self.namespace, client.V1Pod.model_validate(admitted))
        return dict(self.api.sanitize_for_serialization(created))  # type: ignore[no-untyped-call]

    def start(self, pod: dict[str, Any], seconds: int, restored_from: str | None = None) -> None:
        """Scheduled 600 s ago, Ready ``seconds`` later (and PodRestored with it when restored):
        long enough ago for ``outcomes.settle_seconds`` to have passed."""
        restored = float(seconds) if restored_from is not None else None
        message = f"restored from PodSnapshot {restored_from}" if restored_from else ""
        self.report(pod, ago=600, ready=seconds, restored=restored, message=message)

    def report(
        self,
        pod: dict[str, Any],
        *,
        ago: float = 0.0,
        scheduled: datetime | None = None,
        ready: float | None = None,
        restored: float | None = None,
        message: str = "",
        containers: list[dict[str, Any]] | None = None,
    ) -> datetime:
        """What GKE's kubelet and agent report: PodScheduled at ``scheduled`` (else ``ago``
        seconds before now), Ready and PodRestored that many seconds after scheduling, container
        statuses; the scheduling time."""
        if scheduled is None:
            scheduled = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=ago)
        conditions = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(scheduled)}
        ]
        if ready is not None:
            at = stamp(scheduled + timedelta(seconds=ready))
            conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": at})
        if restored is not None:
            at = stamp(scheduled + timedelta(seconds=restored))
            conditions.append(
                {
                    "type": "PodRestored",
                    "status": "True",
                    "lastTransitionTime": at,
                    "message": message,
                }
            )
        status: dict[str, Any] = {"conditions": conditions}
        if containers is not None:
            status["containerStatuses"] = containers
        core = client.CoreV1Api(self.api)
        core.patch_namespaced_pod_status(
            pod["metadata"]["name"], self.namespace, {"status": status}
        )
        return scheduled

    def event(
        self,
        pod: dict[str, Any],
        kind: str,
        message: str,
        at: datetime,
        reason: str = "GKEPodSnapshotting",
    ) -> None:
        """A core/v1 Event on ``pod`` as GKE's snapshot agent writes it (``reason``)."""
        name = pod["metadata"]["name"]
        body = {
            "metadata": {"name": f"{name}.{secrets.token_hex(6)}", "namespace": self.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": self.namespace,
                "name": name,
                "uid": pod["metadata"]["uid"],
            },
            "reason": reason,
            "message": message,
            "type": kind,
            "firstTimestamp": stamp(at),
            "lastTimestamp": stamp(at),
            "count": 1,
            "source": {"component": "gke-pod-snapshot"},
        }
        KubeTransport(self.api, 10.0).create(f"/api/v1/namespaces/{self.namespace}/events", body)


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def set_node_version(api: client.ApiClient, node: str, version: str) -> None:
    """What a node-pool upgrade changes: the kubelet version the node reports."""
    client.CoreV1Api(api).patch_node_status(
        node, {"status": {"nodeInfo": {"kubeletVersion": version}}}
    )


@pytest.fixture
def scenario(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespace: str,
    podsnapshot_crds: list[str],
    snapready_identity: IdentityFactory,
) -> Iterator[Scenario]:
    """A pool with one node on ``OLD``, a policy grouped by ``model``, snapready as leader (its
    ServiceAccount with the chart's default RBAC)."""
    suffix = secrets.token_hex(3)
    pool, node = f"l4-{suffix}", f"gke-l4-{suffix}"
    labels = {
        "cloud.google.com/gke-nodepool": pool,
        "cloud.google.com/machine-family": "g2",
        "node.kubernetes.io/instance-type": "g2-standard-8",
        "cloud.google.com/gke-accelerator": "nvidia-l4",
        "cloud.google.com/gke-gpu-driver-version": "default",
        "kubernetes.io/arch": "amd64",
    }
    core = client.CoreV1Api(kube_admin)
    runtime = client.V1RuntimeClass.model_validate(
        {"metadata": {"name": "gvisor"}, "handler": "gvisor"}
    )
    with contextlib.suppress(ApiException):  # 409: another test created it
        client.NodeV1Api(kube_admin).create_runtime_class(runtime)
    core.create_node(client.V1Node.model_validate({"metadata": {"name": node, "labels": labels}}))
    set_node_version(kube_admin, node, OLD)
    grouping = {"groupByLabelValue": {"labels": ["model"]}}
    create_policy(
        kube_admin, policy("llm-policy", namespace, {"app": "llm"}, snapshotGroupingRules=grouping)
    )
    lease = f"snapready-{namespace}"[:60]
    identity = snapready_identity(namespace, lease_name=lease)
    settings = make_settings(
        source={"kind": "kube", "kubeconfig": require_token(identity.kubeconfig)},
        leader={"lease_name": lease, "lease_namespace": namespace},
        # its own namespace only: the tests share one API server, and a leader tracking every
        # namespace wrote another test's origin records first (the failover test, in CI)
        outcomes={"namespaces": [namespace]},
    )
    source = start_cluster(settings)
    gke = control_plane.gke_client()
    try:
        wait_for("synced", source.synced, timeout=30)
        engine = Engine(settings=settings, state=source.state)
        yield Scenario(
            kube_admin,
            control_plane.admin_kubeconfig,
            namespace,
            pool,
            node,
            source,
            engine,
            gke,
        )
    finally:
        source.stop()
        gke.close()  # type: ignore[no-untyped-call]
        with contextlib.suppress(ApiException):
            core.delete_node(node)


READY = [
    {
        "type": "Ready",
        "status": "True",
        "reason": "AllSnapshotsAvailable",
        "lastTransitionTime": "2026-12-01T10:00:00Z",
        "message": "",
    }
]


def take_snapshot(
    env: Scenario,
    name: str = "snap-1",
    origin: str = "origin",
    conditions: list[dict[str, Any]] = READY,
) -> None:
    """The origin pod on the node, a PodSnapshot naming it (Ready unless ``conditions`` say
    otherwise), its origin record written by the leader."""
    env.create(env.pod(origin), node=env.node)
    key = f"{env.namespace}/{origin}"
    wait_for("origin pod cached", lambda: key in env.source.state().pods, timeout=10)
    custom = client.CustomObjectsApi(env.gke)  # as GKE's controller
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodSnapshot",
        "metadata": {"name": name, "annotations": {"podsnapshot.gke.io/origin-pod": origin}},
        "spec": {"policyName": "llm-policy"},
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, env.namespace, "podsnapshots", body)
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, env.namespace, "podsnapshots", name, {"status": {"conditions": conditions}}
    )
    ready = conditions is READY

    def cached() -> bool:
        view = env.source.state().snapshots.named(env.namespace, name)
        return view is not None and view.ready == ready and view.origin is not None

    wait_for("origin record written and cached", cached, timeout=15)


def populate(env: Scenario) -> dict[str, dict[str, Any]]:
    """Pods of every outcome: restored 5 s; missed, cold_expected and cold_first 46 s each."""
    take_snapshot(env)
    pods = {
        "same": env.create(env.pod("same")),
        "fallback": env.create(env.pod("fallback")),
        "image": env.create(env.pod("image", image="registry.example/llm:v2")),
        "m2": env.create(env.pod("m2", model="m2")),
    }
    env.start(pods["same"], 5, restored_from="snap-1")
    env.start(pods["fallback"], 46)  # predicted hit, started cold: the silent fallback
    env.start(pods["image"], 46)
    env.start(pods["m2"], 46)
    return pods


def snapready(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SNAPREADY), *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def status_json(env: Scenario) -> dict[str, Any]:
    result = snapready(
        "status", "--kubeconfig", str(env.kubeconfig), "-n", env.namespace, "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def explain_json(env: Scenario, pod: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    args = ["explain", pod, "-n", env.namespace, "--kubeconfig", str(env.kubeconfig)]
    assert main([*args, "--format", "json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_status_counts_predictions_outcomes_and_the_saving(scenario: Scenario) -> None:
    populate(scenario)
    report = status_json(scenario)
    assert report["namespace"] == scenario.namespace
    (entry,) = report["policies"]
    assert entry["name"] == "llm-policy" and entry["exists"]
    snapshots = entry["snapshots"]
    assert (snapshots["ready"], snapshots["notReady"], snapshots["stale"]) == (1, 0, 0)
    assert snapshots["newest"]["name"] == "snap-1"
    assert snapshots["newest"]["originVersion"] == OLD[1:]
    assert snapshots["newest"]["originPool"] == scenario.pool
    pods = entry["pods"]
    assert pods["stamped"] == 5  # the origin pod (none: no snapshot yet) and the four others
    assert pods["predictions"] == {"hit": 2, "miss": 1, "none": 2, "unrecorded": 0}
    (miss,) = pods["missReasons"]
    assert miss["count"] == 1 and "spec.containers[0].image" in miss["reason"]
    recent = entry["last24h"]
    assert recent["outcomes"] == {
        "restored": 1,
        "restored_unexpected": 0,
        "missed": 1,
        "restore_failed": 0,
        "cold_expected": 1,
        "cold_first": 1,
    }
    assert recent["pending"] == 1  # the origin pod: never Ready, no evidence
    assert recent["hitRate"] == pytest.approx(1 / 3, abs=1e-3) and recent["hitRateOf"] == 3
    assert recent["p50StartupSeconds"] == {"restored": 5.0, "cold": 46.0}
    assert recent["p50RestoreSeconds"] == 5.0 and recent["p50RestoredReadySeconds"] == 5.0
    assert recent["savingSeconds"] == 41.0
    assert report["last24h"] == recent
    assert report["stale"] == []
    assert "cold_expected" in report["hitRateDefinition"]
    assert "restore_failed" in report["hitRateDefinition"]
    # No origin-keys Secret in this cluster: the one note says the records are unverified.
    notes = [n for n in report["notes"] if not n.startswith("origin records not verified")]
    assert report["gkeEventsRead"] is True and notes == []


def test_status_all_namespaces_names_each_policy_with_its_namespace(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    take_snapshot(scenario)
    assert main(["status", "-A", "--kubeconfig", str(scenario.kubeconfig), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["namespace"] is None
    mine = [p for p in report["policies"] if p["namespace"] == scenario.namespace]
    assert [(p["name"], p["snapshots"]["ready"], p["pods"]["stamped"]) for p in mine] == [
        ("llm-policy", 1, 1)
    ]
    assert main(["status", "-A", "--kubeconfig", str(scenario.kubeconfig)]) == 0
    text = capsys.readouterr().out
    assert "snapready status: all namespaces" in text
    assert f"policy {scenario.namespace}/llm-policy" in text


def test_status_text_is_readable_and_defaults_to_the_kubeconfig_namespace(
    scenario: Scenario, tmp_path: Path
) -> None:
    populate(scenario)
    config = yaml.safe_load(scenario.kubeconfig.read_text())
    config["contexts"][0]["context"]["namespace"] = scenario.namespace
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}
    result = snapready("status", env=env)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert f"snapready status: namespace {scenario.namespace}" in text
    assert "policy llm-policy" in text
    assert "snapshots  1 ready, 0 not ready, 0 stale" in text
    assert f"taken on {OLD[1:]} (pool {scenario.pool}), last access never" in text
    assert "pods       5 stamped: 2 hit, 1 miss, 2 none" in text
    assert "miss x1: spec.containers[0].image differs" in text
    assert "hit rate 33% (1 of 3)" in text
    assert "p50 start-up: restored 5 s, cold 46 s: snapshots save 41 s per pod" in text
    assert (
        "hit rate = (restored + restored_unexpected) / (restored + restored_unexpected + missed"
        in text
    )


def test_upgrade_makes_the_snapshot_stale_and_explain_names_the_versions(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    populate(scenario)
    set_node_version(scenario.api, scenario.node, NEW)
    report = status_json(scenario)
    snapshots = report["policies"][0]["snapshots"]
    assert (snapshots["ready"], snapshots["stale"]) == (0, 1)
    assert snapshots["newest"]["state"] == "stale"
    (group,) = report["stale"]
    assert (group["pool"], group["what"], group["old"], group["new"]) == (
        scenario.pool,
        "version",
        OLD[1:],
        NEW[1:],
    )
    assert group["snapshots"] == ["snap-1"]
    assert "trigger a new checkpoint" in group["note"]

    explained = explain_json(scenario, "same", capsys)
    assert explained["recorded"]["restore-prediction"] == "hit"
    assert explained["prediction"]["outcome"] == "miss"
    (candidate,) = explained["candidates"]
    assert candidate["matches"] is False
    (diff,) = candidate["differences"]
    assert diff["kind"] == "version"
    assert (
        NEW[1:] in diff["detail"] and OLD[1:] in diff["detail"] and scenario.pool in diff["detail"]
    )
    assert diff["hint"] == "trigger a new checkpoint on the upgraded pool"
    assert explained["outcome"]["outcome"] == "restored"

    args = ["explain", "same", "-n", scenario.namespace, "--kubeconfig", str(scenario.kubeconfig)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "recorded at admission: hit snap-1: matches snapshot snap-1" in text
    assert "prediction now: miss snap-1:" in text
    assert "(differs from the recorded one: snapshots or nodes changed since)" in text
    assert f"node pool {scenario.pool} runs {NEW[1:]}, snapshot taken on {OLD[1:]}: " in text
    assert "outcome: restored (" in text and ": restored from a snapshot, as predicted" in text
    assert "after PodScheduled: PodRestored 5 s, Ready 5 s" in text


def test_a_pod_that_lands_only_on_another_machine_series_misses_and_explain_says_why(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    """The snapshot was taken on the G2 pool; an A2 (A100) pool runs the same node version. A
    pod pinned to the A2 pool, or only to its accelerator, can only land on A2 machines, and GKE
    restores only onto the same machine series (domain.md section 3): a miss at admission (a
    hostile trial found it predicted ``hit``), and ``explain`` names the machine family."""
    take_snapshot(scenario)
    suffix = secrets.token_hex(3)
    pool, node = f"a100-{suffix}", f"gke-a100-{suffix}"
    labels = {
        "cloud.google.com/gke-nodepool": pool,
        "cloud.google.com/machine-family": "a2",
        "node.kubernetes.io/instance-type": "a2-highgpu-1g",
        "cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
        "cloud.google.com/gke-gpu-driver-version": "default",
        "kubernetes.io/arch": "amd64",
    }
    core = client.CoreV1Api(scenario.api)
    core.create_node(client.V1Node.model_validate({"metadata": {"name": node, "labels": labels}}))
    try:
        set_node_version(scenario.api, node, OLD)
        wait_for(
            "the A2 pool cached",
            lambda: pool in (pools := scenario.source.state().node_pools) and pools[pool].versions,
            15,
        )
        by_pool = scenario.pod("on-a2")
        by_pool["spec"]["nodeSelector"] = {"cloud.google.com/gke-nodepool": pool}
        by_gpu = scenario.pod("a100-only")
        by_gpu["spec"]["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}
        same = scenario.pod("on-g2")
        for pod, outcome in ((by_pool, "miss"), (by_gpu, "miss"), (same, "hit")):
            annotations = scenario.create(pod)["metadata"]["annotations"]
            assert annotations["snapready.io/restore-prediction"] == outcome, annotations
        reason = f"lands on machine family a2 (node pool {pool}), snapshot taken on g2"
        explained = explain_json(scenario, "on-a2", capsys)
        assert explained["recorded"]["restore-reason"] == reason
        assert explained["prediction"]["outcome"] == "miss"
        (candidate,) = explained["candidates"]
        (diff,) = candidate["differences"]
        assert diff["kind"] == "family" and diff["detail"] == reason
        assert diff["hint"].startswith("pin the machine family the snapshot was taken on")
    finally:
        with contextlib.suppress(ApiException):
            core.delete_node(node)


def test_an_accelerator_pool_at_zero_nodes_and_notin_still_name_the_machine(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial on the real API server: with no A3 node (its pool scaled to zero), a pod pinned
    to ``nvidia-h100-80gb`` was predicted ``hit`` from the G2 snapshot, and so was one whose
    affinity rules G2 out (``machine-family NotIn [g2]``). H100s run only on A3 machines, and
    the scheduler never places the second on G2: both are misses, and ``explain`` agrees."""
    take_snapshot(scenario)
    h100 = scenario.pod("h100")
    h100["spec"]["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    not_g2 = scenario.pod("not-g2")
    expression = {"key": "cloud.google.com/machine-family", "operator": "NotIn", "values": ["g2"]}
    not_g2["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }
    cases = (
        (h100, "pinned to a3 by accelerator nvidia-h100-80gb, snapshot taken on g2"),
        (not_g2, "node selection rules out machine family g2, snapshot taken there"),
    )
    for pod, reason in cases:
        annotations = scenario.create(pod)["metadata"]["annotations"]
        assert annotations["snapready.io/restore-prediction"] == "miss", annotations
        assert annotations["snapready.io/restore-reason"] == reason
        explained = explain_json(scenario, pod["metadata"]["name"], capsys)
        assert explained["prediction"]["outcome"] == "miss"
        (candidate,) = explained["candidates"]
        (diff,) = candidate["differences"]
        assert diff["kind"] == "family" and diff["detail"] == reason


def test_a_gvisor_pod_is_judged_by_the_sandbox_pools_it_tolerates(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    """GKE upgrades node pools one at a time. A pool still runs the snapshot's ``OLD``; a GKE
    Sandbox pool (labelled and tainted ``sandbox.gke.io/runtime=gvisor``, as GKE makes them)
    runs ``NEW``. A pod of the ``gvisor`` RuntimeClass selects and tolerates the Sandbox label
    (the RuntimeClass admission plugin merges them in on GKE), so it lands only there: a miss
    naming that pool (it was ``hit``: any pool on ``OLD`` counted). Taints count too: with the
    old pool tainted ``dedicated=inference:NoSchedule``, a pod that tolerates only the Sandbox
    taint lands on the Sandbox pool (a miss); one tolerating both may land on the old pool.
    The two pools have a machine type of their own, which every pod here pins: other tests'
    nodes on the shared API server are never among the pools compared."""
    take_snapshot(scenario)
    suffix = secrets.token_hex(3)
    machine = f"g2-standard-{int(suffix, 16)}"
    old_pool, old_node = f"plain-{suffix}", f"gke-plain-{suffix}"
    pool, node = f"sandbox-{suffix}", f"gke-sandbox-{suffix}"

    def labels(name: str, sandbox: bool) -> dict[str, str]:
        return {
            "cloud.google.com/gke-nodepool": name,
            "cloud.google.com/machine-family": "g2",
            "node.kubernetes.io/instance-type": machine,
            "cloud.google.com/gke-accelerator": "nvidia-l4",
            "cloud.google.com/gke-gpu-driver-version": "default",
            "kubernetes.io/arch": "amd64",
            **({"sandbox.gke.io/runtime": "gvisor"} if sandbox else {}),
        }

    sandbox_taint = {"key": "sandbox.gke.io/runtime", "value": "gvisor", "effect": "NoSchedule"}
    gpu_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    dedicated = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}
    core = client.CoreV1Api(scenario.api)
    nodes = (
        (node, labels(pool, True), [sandbox_taint, gpu_taint], NEW),
        (old_node, labels(old_pool, False), [gpu_taint], OLD),
    )
    try:
        for name, node_labels, taints, version in nodes:
            body = {"metadata": {"name": name, "labels": node_labels}, "spec": {"taints": taints}}
            core.create_node(client.V1Node.model_validate(body))
            set_node_version(scenario.api, name, version)

        def cached(name: str, taints: int) -> bool:
            facts = scenario.source.state().node_pools.get(name)
            return facts is not None and len(facts.taints) == taints and bool(facts.versions)

        wait_for("both pools cached", lambda: cached(pool, 2) and cached(old_pool, 1), 15)
        sandbox_toleration = {
            "key": "sandbox.gke.io/runtime",
            "operator": "Equal",
            "value": "gvisor",
            "effect": "NoSchedule",
        }
        pin = {"node.kubernetes.io/instance-type": machine}
        gvisor = scenario.pod("gvisor-pod")
        gvisor["spec"]["nodeSelector"] = {**pin, "sandbox.gke.io/runtime": "gvisor"}
        gvisor["spec"]["tolerations"] = [sandbox_toleration]
        plain = scenario.pod("plain-pod")
        plain["spec"]["nodeSelector"] = pin
        plain["spec"]["tolerations"] = [sandbox_toleration]
        assert (
            scenario.create(plain)["metadata"]["annotations"]["snapready.io/restore-prediction"]
            == "hit"
        ), "without the Sandbox selector it may land on the old pool"
        reason = f"node pool {pool} runs {NEW[1:]}, snapshot taken on {OLD[1:]}"
        annotations = scenario.create(gvisor)["metadata"]["annotations"]
        assert annotations["snapready.io/restore-prediction"] == "miss", annotations
        assert annotations["snapready.io/restore-reason"] == reason
        explained = explain_json(scenario, "gvisor-pod", capsys)
        assert explained["prediction"]["reason"] == reason

        core.patch_node(old_node, {"spec": {"taints": [gpu_taint, dedicated]}})
        wait_for("the old pool's taint cached", lambda: cached(old_pool, 2), 15)
        only_sandbox = scenario.pod("only-sandbox")
        only_sandbox["spec"]["nodeSelector"] = pin
        only_sandbox["spec"]["tolerations"] = [sandbox_toleration]
        both = scenario.pod("both")
        both["spec"]["nodeSelector"] = pin
        both["spec"]["tolerations"] = [
            sandbox_toleration,
            {"key": "dedicated", "operator": "Exists"},
        ]
        for pod, outcome in ((only_sandbox, "miss"), (both, "hit")):
            annotations = scenario.create(pod)["metadata"]["annotations"]
            assert annotations["snapready.io/restore-prediction"] == outcome, annotations
    finally:
        for name, *_ in nodes:
            with contextlib.suppress(ApiException):
                core.delete_node(name)


def test_explain_names_the_image_field_with_a_hint(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    populate(scenario)
    report = explain_json(scenario, "image", capsys)
    assert [p["name"] for p in report["policies"]] == ["llm-policy"]
    assert report["fingerprint"]["source"] == "annotation"
    assert report["recorded"]["restore-prediction"] == "miss"
    assert report["prediction"]["outcome"] == "miss"
    assert report["prediction"]["fields"] == ["spec.containers[0].image"]
    (candidate,) = report["candidates"]
    assert candidate["snapshot"] == "snap-1" and candidate["originPod"] == "origin"
    (diff,) = candidate["differences"]
    assert diff == {
        "kind": "field",
        "path": "spec.containers[0].image",
        "detail": "spec.containers[0].image differs",
        "hint": "roll back to the snapshot's image, or trigger a new checkpoint",
    }
    assert report["outcome"]["outcome"] == "cold_expected"
    assert report["outcome"]["startupSeconds"] == 46.0

    other = explain_json(scenario, "m2", capsys)
    assert other["prediction"]["outcome"] == "none"
    assert other["candidates"] == [] and "no Ready snapshot" in other["noCandidates"]


def policy_block(report: dict[str, Any]) -> dict[str, Any]:
    (entry,) = report["policies"]
    assert entry["name"] == "llm-policy"
    block: dict[str, Any] = entry
    return block


def test_a_restore_is_pending_at_ready_and_restored_at_pod_restored(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    """Google's measured timeline: Ready 5 s after scheduling, PodRestored 28 s later. At Ready
    nothing is known yet (never "missed"); at PodRestored it is restored, 33 s on GKE's clock."""
    take_snapshot(scenario)
    pod = scenario.create(scenario.pod("late"))
    scheduled = scenario.report(pod, ago=40, ready=5)  # Ready 35 s ago: settle not over

    recent = policy_block(status_json(scenario))["last24h"]
    assert recent["outcomes"]["missed"] == 0 and recent["outcomes"]["restored"] == 0
    assert recent["pending"] == 2  # this pod and the (never Ready) origin pod
    assert recent["hitRate"] is None
    waiting = explain_json(scenario, "late", capsys)["outcome"]
    assert waiting["outcome"] == "pending"
    assert "PodRestored" in waiting["waitingFor"] and "missed" in waiting["waitingFor"]
    assert waiting["readySeconds"] == 5.0 and waiting["restoreSeconds"] is None

    restored = "restored from PodSnapshot snap-1"
    scenario.report(pod, scheduled=scheduled, ready=5, restored=33, message=restored)
    recent = policy_block(status_json(scenario))["last24h"]
    assert recent["outcomes"]["restored"] == 1 and recent["outcomes"]["missed"] == 0
    assert recent["pending"] == 1
    assert recent["hitRate"] == 1.0
    assert recent["p50StartupSeconds"]["restored"] == 33.0  # to PodRestored, not to Ready
    assert recent["p50RestoreSeconds"] == 33.0
    assert recent["p50RestoredReadySeconds"] == 5.0

    report = explain_json(scenario, "late", capsys)
    outcome = report["outcome"]
    assert (outcome["outcome"], outcome["evidence"]) == ("restored", "PodRestored")
    assert (outcome["restoreSeconds"], outcome["readySeconds"]) == (33.0, 5.0)
    assert outcome["scheduledAt"] == stamp(scheduled)
    # the simulated transitions are back-dated, so creation (now) sorts last; the rest in order
    steps = [(e["what"], e["time"]) for e in report["timeline"] if e["what"] != "created"]
    assert steps == [
        (what, stamp(scheduled + timedelta(seconds=after)))
        for what, after in (("PodScheduled", 0), ("Ready", 5), ("PodRestored", 33))
    ]
    assert [e["what"] for e in report["timeline"]].count("created") == 1


def test_gke_fallback_warning_is_missed_at_once_and_quoted(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    """GKE's Warning "... falling back to a cold start of pod ..." on a pod predicted to restore
    decides ``missed`` before the settle time, with GKE's reason in explain's timeline."""
    take_snapshot(scenario)
    pod = scenario.create(scenario.pod("skipped"))
    scheduled = scenario.report(pod, ago=60, ready=46)  # Ready 14 s ago: settle not over
    gke_says = (
        f"no compatible PodSnapshot for node version {NEW[1:]}, falling back to a cold start "
        f"of pod: {scenario.namespace}/skipped"
    )
    scenario.event(pod, "Warning", gke_says, scheduled + timedelta(seconds=2))
    scenario.event(pod, "Normal", "decoy: not GKE's", scheduled, reason="Scheduled")

    report = status_json(scenario)
    recent = policy_block(report)["last24h"]
    assert recent["outcomes"]["missed"] == 1 and recent["outcomes"]["restored"] == 0
    assert recent["p50StartupSeconds"]["cold"] == 46.0
    assert report["gkeEventsRead"] is True

    explained = explain_json(scenario, "skipped", capsys)
    outcome = explained["outcome"]
    assert (outcome["outcome"], outcome["evidence"]) == ("missed", "GKE event")
    assert outcome["gkeReason"] == gke_says
    assert (outcome["readySeconds"], outcome["restoreSeconds"]) == (46.0, None)  # no restore
    gke = [e for e in explained["timeline"] if e["what"].startswith("GKE event")]
    assert [(e["type"], e["message"]) for e in gke] == [("Warning", gke_says)]
    assert all("decoy" not in (e["message"] or "") for e in explained["timeline"])

    args = [
        "explain",
        "skipped",
        "-n",
        scenario.namespace,
        "--kubeconfig",
        str(scenario.kubeconfig),
    ]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert f"GKE event (fallback) Warning: {gke_says}" in text
    assert f"GKE says: {gke_says}" in text


def test_a_crashed_restore_is_restore_failed_and_counts_against_the_hit_rate(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    take_snapshot(scenario)
    pod = scenario.create(scenario.pod("crash"))
    error = (
        "OCI runtime restore failed: restoring container: vfs.CompleteRestore() failed: "
        "file /data/db/journal changed since the checkpoint"
    )
    crashing = {
        "name": "server",
        "image": IMAGE,
        "imageID": "",
        "ready": False,
        "restartCount": 4,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
        "lastState": {"terminated": {"exitCode": 128, "reason": "StartError", "message": error}},
    }
    scenario.report(pod, ago=120, containers=[crashing])  # never Ready

    recent = policy_block(status_json(scenario))["last24h"]
    assert recent["outcomes"]["restore_failed"] == 1
    assert recent["outcomes"]["missed"] == 0 and recent["outcomes"]["restored"] == 0
    assert (recent["hitRate"], recent["hitRateOf"]) == (0.0, 1)  # attempted, did not serve

    outcome = explain_json(scenario, "crash", capsys)["outcome"]
    assert outcome["outcome"] == "restore_failed"
    assert "vfs.CompleteRestore() failed" in outcome["restoreFailure"]


def test_a_ready_pod_without_evidence_stays_pending_within_settle(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    take_snapshot(scenario)
    fresh = scenario.create(scenario.pod("fresh"))
    scenario.report(fresh, ago=20, ready=10)
    old = scenario.create(scenario.pod("old"))
    scenario.report(old, ago=900, ready=10)  # Ready 890 s ago, nothing since: started cold

    recent = policy_block(status_json(scenario))["last24h"]
    assert recent["outcomes"]["missed"] == 1  # "old" only
    assert recent["pending"] == 2  # "fresh" and the origin pod
    assert explain_json(scenario, "fresh", capsys)["outcome"]["outcome"] == "pending"
    outcome = explain_json(scenario, "old", capsys)["outcome"]
    assert (outcome["outcome"], outcome["evidence"]) == ("missed", "no restore evidence")

    # a pod snapready never stamped (created past the webhook) has a timeline but no outcome
    core = client.CoreV1Api(scenario.api)
    raw = core.create_namespaced_pod(
        scenario.namespace, client.V1Pod.model_validate(scenario.pod("raw"))
    )
    scenario.report(scenario.api.sanitize_for_serialization(raw), ago=900, ready=10)  # type: ignore[no-untyped-call]
    unstamped = explain_json(scenario, "raw", capsys)
    assert unstamped["outcome"] is None
    assert [e["what"] for e in unstamped["timeline"]].count("Ready") == 1
    assert policy_block(status_json(scenario))["pods"]["stamped"] == 3  # origin, fresh, old


AWAITING = [
    {
        "type": "Checkpoint",
        "status": "False",
        "reason": "AwaitingCheckpoint",
        "lastTransitionTime": "2026-12-01T10:00:00Z",
        "message": "uploading the memory image",
    },
    {
        "type": "Ready",
        "status": "False",
        "reason": "AwaitingCheckpoint",
        "lastTransitionTime": "2026-12-01T10:00:00Z",
        "message": "",
    },
]
FAILED = [
    {
        "type": "Checkpoint",
        "status": "False",
        "reason": "Failed",
        "lastTransitionTime": "2026-12-01T10:05:00Z",
        "message": "runsc error: exit status 128",
    },
    {
        "type": "Ready",
        "status": "False",
        "reason": "Failed",
        "lastTransitionTime": "2026-12-01T10:05:00Z",
        "message": "",
    },
]


def test_awaiting_and_failed_checkpoints_with_the_driver_hint(
    scenario: Scenario, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The node runs GKE's default GPU driver branch: exit status 128 means driver < 570."""
    take_snapshot(scenario)
    take_snapshot(scenario, "snap-up", "origin-up", AWAITING)
    take_snapshot(scenario, "snap-bad", "origin-bad", FAILED)

    report = status_json(scenario)
    snapshots = policy_block(report)["snapshots"]
    assert (snapshots["total"], snapshots["ready"], snapshots["notReady"]) == (3, 1, 0)
    assert (snapshots["awaiting"], snapshots["failed"]) == (1, 1)
    (awaiting,) = snapshots["awaitingCheckpoints"]
    assert (awaiting["name"], awaiting["originPod"]) == ("snap-up", "origin-up")
    assert awaiting["stalled"] is False  # seconds old, checkpoint.stall_seconds is 1800
    assert 0 <= awaiting["awaitingSeconds"] < report["stallSeconds"]
    (failed,) = snapshots["failedCheckpoints"]
    assert (failed["name"], failed["originPod"]) == ("snap-bad", "origin-bad")
    assert failed["message"] == "runsc error: exit status 128"
    assert "570" in failed["hint"] and "gke-gpu-driver-version: latest" in failed["hint"]

    config = tmp_path / "settings.yaml"
    config.write_text("checkpoint:\n  stall_seconds: 0.5\n")
    time.sleep(1.0)  # awaiting longer than 0.5 s
    args = ["status", "--kubeconfig", str(scenario.kubeconfig), "-n", scenario.namespace]
    result = snapready(*args, "--config", str(config))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "1 awaiting checkpoint, 1 checkpoint failed" in text
    assert "awaiting   snap-up (origin origin-up), checkpoint uploading for" in text
    assert "STALLED, past checkpoint.stall_seconds (0.5 s)" in text
    assert "failed     snap-bad (origin origin-bad): GKE says: runsc error: exit status 128" in text
    assert f"likely cause: {failed['hint']}" in text

    explained = explain_json(scenario, "origin-bad", capsys)
    (mine,) = explained["checkpoints"]
    assert (mine["snapshot"], mine["state"], mine["checkpoint"]) == ("snap-bad", "failed", "failed")
    assert mine["message"] == "runsc error: exit status 128" and mine["hint"] == failed["hint"]
    uploading = explain_json(scenario, "origin-up", capsys)["checkpoints"]
    assert [(c["snapshot"], c["checkpoint"]) for c in uploading] == [("snap-up", "awaiting")]


def test_status_without_the_right_to_list_events_says_so(
    scenario: Scenario, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """A user who may read pods and snapshots but not Events: outcomes still, and a note."""
    populate(scenario)
    token = service_account_token(scenario.api, scenario.namespace, "reader")
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {
            "apiGroups": [GROUP],
            "resources": ["podsnapshots", "podsnapshotpolicies"],
            "verbs": ["get", "list"],
        },
    ]
    rbac = client.RbacAuthorizationV1Api(scenario.api)
    role = {"metadata": {"name": "reader"}, "rules": rules}
    rbac.create_namespaced_role(scenario.namespace, client.V1Role.model_validate(role))
    binding = {
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": scenario.namespace}],
    }
    rbac.create_namespaced_role_binding(
        scenario.namespace, client.V1RoleBinding.model_validate(binding)
    )
    kubeconfig = control_plane.token_kubeconfig(tmp_path / "reader.kubeconfig", token)
    args = ["status", "--kubeconfig", str(kubeconfig), "-n", scenario.namespace, "--format", "json"]

    def allowed() -> bool:
        return snapready(*args).returncode == 0

    wait_for("the reader's role is in force", allowed, timeout=15)
    result = snapready(*args)
    report = json.loads(result.stdout)
    assert report["gkeEventsRead"] is False
    assert "outcomes are decided without GKE's events" in result.stderr
    assert any("GKEPodSnapshotting" in note for note in report["notes"])
    recent = policy_block(report)["last24h"]
    assert recent["outcomes"]["restored"] == 1 and recent["outcomes"]["missed"] == 1


def test_unknown_pod_bad_kubeconfig_and_unreachable_api_exit_2(
    scenario: Scenario, tmp_path: Path
) -> None:
    result = snapready(
        "explain", "nope", "-n", scenario.namespace, "--kubeconfig", str(scenario.kubeconfig)
    )
    assert result.returncode == 2
    assert result.stderr == f"snapready: pod {scenario.namespace}/nope not found\n"

    missing = snapready("status", "--kubeconfig", str(tmp_path / "absent"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    device = snapready("status", "--kubeconfig", "/dev/null")  # exists: not "no such file"
    assert device.returncode == 2 and "not a regular file" in device.stderr

    config = yaml.safe_load(scenario.kubeconfig.read_text())
    server = f"https://127.0.0.1:{free_port()}"
    config["clusters"][0]["cluster"]["server"] = server
    closed = tmp_path / "closed.kubeconfig"
    closed.write_text(yaml.safe_dump(config))
    down = snapready("status", "--kubeconfig", str(closed), "-n", "x", "--config", "/dev/null")
    assert down.returncode == 2
    assert down.stderr.startswith(f"snapready: cannot reach the API server {server} (kubeconfig ")
    assert "Connection refused" in down.stderr
    assert "Traceback" not in down.stderr and down.stderr.count("\n") == 1


SPEC = {
    "initContainers": [{"name": "snapready-helpers"}],
    "containers": [{"name": "server"}],
    "volumes": [{"name": "cache"}],
}


@pytest.mark.parametrize(
    ("path", "ours", "theirs", "detail", "hint"),
    [
        pytest.param(
            "spec.initContainers[0].image",
            "a",
            "b",
            "spec.initContainers[0].image differs",
            "snapready's helpers image differs: admit with the injection.helpers_image the "
            "snapshot was taken with, or trigger a new checkpoint",
            id="helpers-image-names-the-setting",
        ),
        pytest.param(
            "spec.containers[0].command",
            "a",
            "b",
            "spec.containers[0].command differs",
            "set command of container server back to the snapshot's, or trigger a new checkpoint",
            id="container-field-names-the-container",
        ),
        pytest.param(
            "spec.volumes[0].emptyDir",
            "a",
            "b",
            "spec.volumes[0].emptyDir differs",
            "set emptyDir of volume cache back to the snapshot's, or trigger a new checkpoint",
            id="volume-field-names-the-volume",
        ),
        pytest.param(
            "spec.containers[1].name",
            "a",
            None,
            "spec.containers[1].name is new",
            "remove it, or trigger a new checkpoint",
            id="added-field",
        ),
        pytest.param(
            "spec.hostNetwork",
            None,
            "b",
            "spec.hostNetwork is gone (the snapshot's pod had it)",
            "add it back, or trigger a new checkpoint",
            id="removed-field",
        ),
    ],
)
def test_field_hints(
    path: str, ours: str | None, theirs: str | None, detail: str, hint: str
) -> None:
    mine = {path: ours} if ours else {}
    origin = {path: theirs} if theirs else {}
    entry = field_entry(path, mine, origin, SPEC)
    assert (entry["detail"], entry["hint"]) == (detail, hint)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (-3, "0s"), (59, "59s"), (600, "10m"), (7200, "2h"), (7260, "2h1m"), (3e5, "3d")],
)
def test_age_text(seconds: float | None, text: str) -> None:
    assert age_text(seconds) == text
