"""``snapready status`` and ``snapready explain`` against a real API server.

The scenario is simulated the way GKE acts on a cluster (as in ``tests/cluster/test_snapshots``):
a Node of pool ``l4-*`` with GKE labels and a kubelet version, the ``gvisor`` RuntimeClass, a
grouped PodSnapshotPolicy, an origin pod admitted through snapready's engine and created, a
PodSnapshot naming it made Ready through the status subresource, and a snapready cluster source
(leader) writing the origin record. Later pods are admitted by the same engine (so they carry the
admission-time prediction annotations), created, and given Ready / PodRestored conditions through
``pods/status``. The commands run as subprocesses (``snapready status --kubeconfig ...``) or
in-process (``webhook.cli.main``).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.conftest import make_settings
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import wait_for
from tests.support.kube_real import create_policy, policy
from tests.support.ports import free_port
from webhook.admission.engine import Engine, admit
from webhook.cli import main
from webhook.cli.explain_hints import field_entry
from webhook.cli.status_text import age_text
from webhook.cluster.caches import ClusterSource
from webhook.cluster.wiring import open_cluster_source
from webhook.kube.review import AdmissionRequest

GROUP, VERSION = "podsnapshot.gke.io", "v1"
OLD, NEW = "v1.35.3-gke.1234000", "v1.35.4-gke.100"
IMAGE = "registry.example/llm@sha256:" + "ab" * 32
SNAPREADY = Path(sys.executable).with_name("snapready")


@dataclass
class Scenario:
    """One test's cluster: namespace, pool and node, the admin kubeconfig, snapready running."""

    api: client.ApiClient
    kubeconfig: Path
    namespace: str
    pool: str
    node: str
    source: ClusterSource
    engine: Engine

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
        """Turn ``pod`` Ready ``seconds`` after its creation (and PodRestored when restored)."""
        created = datetime.fromisoformat(
            pod["metadata"]["creationTimestamp"].replace("Z", "+00:00")
        )
        ready_at = (created + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": ready_at}]
        if restored_from is not None:
            conditions.append(
                {
                    "type": "PodRestored",
                    "status": "True",
                    "lastTransitionTime": ready_at,
                    "message": f"restored from PodSnapshot {restored_from}",
                }
            )
        core = client.CoreV1Api(self.api)
        core.patch_namespaced_pod_status(
            pod["metadata"]["name"], self.namespace, {"status": {"conditions": conditions}}
        )


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
) -> Iterator[Scenario]:
    """A pool with one node on ``OLD``, a policy grouped by ``model``, snapready as leader."""
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
    settings = make_settings(
        source={"kind": "kube", "kubeconfig": control_plane.admin_kubeconfig},
        leader={"lease_name": f"snapready-{namespace}"[:60], "lease_namespace": namespace},
    )
    source = open_cluster_source(settings)
    try:
        wait_for("synced", source.synced, timeout=30)
        engine = Engine(settings=settings, state=source.state)
        yield Scenario(
            kube_admin, control_plane.admin_kubeconfig, namespace, pool, node, source, engine
        )
    finally:
        source.stop()
        with contextlib.suppress(ApiException):
            core.delete_node(node)


def take_snapshot(env: Scenario, name: str = "snap-1") -> None:
    """The origin pod on the node, a Ready PodSnapshot naming it, its origin record written."""
    env.create(env.pod("origin"), node=env.node)
    wait_for("origin pod cached", lambda: len(env.source.state().pods) > 0, timeout=10)
    custom = client.CustomObjectsApi(env.api)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodSnapshot",
        "metadata": {"name": name, "annotations": {"podsnapshot.gke.io/origin-pod": "origin"}},
        "spec": {"policyName": "llm-policy"},
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, env.namespace, "podsnapshots", body)
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "AllSnapshotsAvailable",
        "lastTransitionTime": "2026-12-01T10:00:00Z",
        "message": "",
    }
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, env.namespace, "podsnapshots", name, {"status": {"conditions": [ready]}}
    )

    def cached() -> bool:
        view = env.source.state().snapshots.named(env.namespace, name)
        return view is not None and view.ready and view.origin is not None

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
        "cold_expected": 1,
        "cold_first": 1,
    }
    assert recent["hitRate"] == pytest.approx(1 / 3, abs=1e-3) and recent["hitRateOf"] == 3
    assert recent["p50StartupSeconds"] == {"restored": 5.0, "cold": 46.0}
    assert recent["savingSeconds"] == 41.0
    assert report["last24h"] == recent
    assert report["stale"] == []
    assert "cold_expected" in report["hitRateDefinition"]


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
    assert "outcome: Ready after 5 s: restored, restored from a snapshot, as predicted" in text


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
