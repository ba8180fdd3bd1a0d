"""Knowing the snapshots, on a real API server: origin records and restore predictions.

GKE's agent is simulated the way it acts on a cluster: Node objects with GKE labels and a
``status.nodeInfo.kubeletVersion``; an origin pod admitted through snapready's engine and created
on a node; a PodSnapshot naming it (``podsnapshot.gke.io/origin-pod``) turned Ready through the
status subresource. snapready (a real cluster source with leader election) must write the origin
record on the PodSnapshot, and predict ``hit``/``miss``/``none`` for later pods from memory.

Identities: snapready runs as its ServiceAccount with the chart's RBAC (``tests/support/identity``);
PodSnapshots are created and turned Ready as GKE's snapshot controller (``Env.gke``), the only
identity GKE's guard lets write them.
"""

from __future__ import annotations

import contextlib
import copy
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import jsonpatch
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.conftest import make_settings
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import wait_for
from tests.support.identity import SnapreadyIdentity, chart_values, install_identity, require_token
from tests.support.kube_real import create_policy, policy
from tests.support.records import view_of, wait_record
from webhook.admission.engine import Engine, admit
from webhook.base.config import Settings
from webhook.cluster.manager import Cluster, start_cluster
from webhook.kube.review import AdmissionRequest
from webhook.server.runner import build_engine
from webhook.snapshots.views import OriginRecord

GROUP, VERSION = "podsnapshot.gke.io", "v1"
OLD, NEW = "v1.35.3-gke.1234000", "v1.35.4-gke.100"
IMAGE = "registry.example/llm@sha256:" + "ab" * 32


@dataclass
class Env:
    """One test's cluster: namespace, node pool, source, engine and the Ready snapshot.

    ``api`` is admin (test setup); ``gke`` is GKE's snapshot controller (PodSnapshot writes);
    ``identity`` is snapready's ServiceAccount, which ``source`` runs as."""

    api: client.ApiClient
    namespace: str
    pool: str
    node: str
    source: Cluster
    engine: Engine
    gke: client.ApiClient
    identity: SnapreadyIdentity
    snapshot: str = ""
    origin_hash: str = ""

    def pod(self, name: str, **changes: Any) -> dict[str, Any]:
        """A selected gVisor L4 pod pinned to the pool (``changes`` edit container 0, and
        ``spec`` adds PodSpec fields)."""
        container = {
            "name": "server",
            "image": IMAGE,
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        }
        container.update(changes.pop("container", {}))
        labels = {"app": "llm", "model": "m1", **changes.pop("labels", {})}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": labels,
                "annotations": changes.pop("annotations", {}),
            },
            "spec": {
                "runtimeClassName": "gvisor",
                "nodeSelector": {"cloud.google.com/gke-nodepool": self.pool},
                "containers": [container],
                **changes.pop("spec", {}),
            },
        }

    def mutate(self, pod: dict[str, Any], engine: Engine | None = None) -> Any:
        """snapready's mutating answer for a CREATE of ``pod``."""
        request = AdmissionRequest.model_validate(
            {
                "uid": secrets.token_hex(4),
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "namespace": self.namespace,
                "operation": "CREATE",
                "object": pod,
            }
        )
        return admit(request, "mutate", engine or self.engine)

    def annotations(self, pod: dict[str, Any], engine: Engine | None = None) -> dict[str, str]:
        """The pod as admitted: its annotations after the mutating patch."""
        decision = self.mutate(pod, engine)
        assert decision.allowed, decision.message
        admitted = jsonpatch.apply_patch(pod, list(decision.patch))
        return dict(admitted["metadata"]["annotations"])


def kube_settings(identity: SnapreadyIdentity, namespace: str, **overrides: Any) -> Settings:
    """Cluster mode as snapready's ServiceAccount (``identity``, never admin: ``require_token``);
    this test's own Lease (the one the chart's Role lets it write)."""
    kubeconfig = require_token(identity.kubeconfig)
    return make_settings(
        source={"kind": "kube", "kubeconfig": kubeconfig, "backoff_max_seconds": 0.5},
        leader={"lease_name": identity.lease_name, "lease_namespace": namespace},
        **overrides,
    )


def ensure_runtime_class(api: client.ApiClient) -> None:
    """The ``gvisor`` RuntimeClass GKE Sandbox provides (the RuntimeClass plugin needs it)."""
    body = client.V1RuntimeClass.model_validate(
        {"metadata": {"name": "gvisor"}, "handler": "gvisor"}
    )
    with contextlib.suppress(ApiException):  # 409: another test created it
        client.NodeV1Api(api).create_runtime_class(body)


def set_node_version(api: client.ApiClient, node: str, version: str) -> None:
    """What a node-pool upgrade changes: the kubelet version the node reports."""
    body = {"status": {"nodeInfo": {"kubeletVersion": version}}}
    client.CoreV1Api(api).patch_node_status(node, body)


@contextlib.contextmanager
def make_env(
    control_plane: ControlPlane,
    api: client.ApiClient,
    namespace: str,
    *,
    trigger: str = "workload",
    **overrides: Any,
) -> Iterator[Env]:
    """A pool with one node on the old version, a grouped policy (trigger type ``trigger``),
    snapready running with ``overrides`` of its settings (``outcomes={"settle_seconds": 2}``,
    ...) as its ServiceAccount with the chart's RBAC for those settings (``chart_values``)."""
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
    core = client.CoreV1Api(api)
    ensure_runtime_class(api)
    core.create_node(client.V1Node.model_validate({"metadata": {"name": node, "labels": labels}}))
    set_node_version(api, node, OLD)
    body = policy(
        "llm-policy",
        namespace,
        {"app": "llm"},
        trigger=trigger,
        snapshotGroupingRules={"groupByLabelValue": {"labels": ["model"]}},
    )
    with contextlib.suppress(ApiException):  # 409: a second source in the same namespace
        create_policy(api, body)
    # Many snapready sources share the test API server: this one tracks only its namespace.
    overrides["outcomes"] = {"namespaces": [namespace], **overrides.get("outcomes", {})}
    stack = contextlib.ExitStack()
    try:
        identity = stack.enter_context(
            install_identity(
                control_plane,
                api,
                control_plane.directory / "identities",
                namespace,
                chart_values(overrides),
                lease_name=f"snapready-{namespace}"[:60],
            )
        )
        gke = control_plane.gke_client()
        stack.callback(gke.close)
        settings = kube_settings(identity, namespace, **overrides)
        source = start_cluster(settings)
        stack.callback(source.stop)
        wait_for("synced", source.synced, timeout=30)
        engine = Engine(settings=settings, state=source.state)
        yield Env(api, namespace, pool, node, source, engine, gke, identity)
    finally:
        stack.close()
        with contextlib.suppress(ApiException):
            core.delete_node(node)


@contextlib.contextmanager
def leading_env(
    control_plane: ControlPlane, api: client.ApiClient, namespace: str, **overrides: Any
) -> Iterator[Env]:
    """``make_env``, once its snapready leads (it alone in the test: at most 20 s)."""
    with make_env(control_plane, api, namespace, **overrides) as made:
        wait_for("leader", lambda: made.source.state().details.get("leader") == "leader", 20)
        yield made


@pytest.fixture
def env(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespace: str,
    podsnapshot_crds: list[str],
) -> Iterator[Env]:
    """A pool with one node on the old version, a grouped policy, snapready running."""
    with make_env(control_plane, kube_admin, namespace) as made:
        yield made


def take_snapshot(
    env: Env, name: str = "snap-1", origin: str = "origin", **changes: Any
) -> dict[str, Any]:
    """Admit and create the origin pod on the node (``changes`` as for ``Env.pod``), then a
    Ready PodSnapshot naming it."""
    pod = env.pod(origin, **changes)
    decision = env.mutate(pod)
    admitted = jsonpatch.apply_patch(pod, list(decision.patch))
    admitted["spec"]["nodeName"] = env.node
    assert admitted["metadata"]["labels"]["snapready.io/selected"] == "true"
    core = client.CoreV1Api(env.api)
    core.create_namespaced_pod(env.namespace, client.V1Pod.model_validate(admitted))
    wait_for(
        "origin pod cached", lambda: f"{env.namespace}/{origin}" in env.source.state().pods, 10
    )
    env.origin_hash = admitted["metadata"]["annotations"]["snapready.io/spec-hash"]
    custom = client.CustomObjectsApi(env.gke)  # GKE creates PodSnapshots, no one else may
    gke_says = {"podsnapshot.gke.io/origin-pod": origin, "podsnapshot.gke.io/origin-node": env.node}
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodSnapshot",
        "metadata": {"name": name, "annotations": gke_says},
        "spec": {"policyName": "llm-policy"},
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, env.namespace, "podsnapshots", body)
    status = {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "AllSnapshotsAvailable",
                    "lastTransitionTime": "2026-12-01T10:00:00Z",
                    "message": "",
                }
            ]
        }
    }
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, env.namespace, "podsnapshots", name, status
    )
    env.snapshot = name
    record = wait_record(env.api, env.namespace, name)

    def cached() -> bool:
        view = env.source.state().snapshots.named(env.namespace, name)
        return view is not None and view.ready and view.origin is not None

    wait_for("record cached", cached, timeout=10)
    return record


def test_origin_record_names_pod_fingerprint_fields_node_and_group(env: Env) -> None:
    """The record is a SnapshotRecord snapready owns (issue 31): named after the PodSnapshot,
    owned by it, GKE's origin-node recorded as GKE's word; the PodSnapshot is left as GKE
    wrote it."""
    obj = take_snapshot(env)
    snapshot = cast(
        "dict[str, Any]",
        client.CustomObjectsApi(env.api).get_namespaced_custom_object(
            GROUP, VERSION, env.namespace, "podsnapshots", env.snapshot
        ),
    )
    assert [(o["kind"], o["name"], o["uid"]) for o in obj["metadata"]["ownerReferences"]] == [
        ("PodSnapshot", env.snapshot, snapshot["metadata"]["uid"])
    ]
    assert not [k for k in snapshot["metadata"].get("annotations", {}) if "snapready" in k]
    view = view_of(obj)
    assert view.snapshot_uid == snapshot["metadata"]["uid"] and not view.converted
    record = view.record
    assert (record.node_name, record.node_from) == (env.node, "gke")
    assert record.pod == "origin"
    assert record.spec_hash == env.origin_hash
    assert "spec.containers[0].image" in record.fields
    assert dict(record.node) == {
        "pool": env.pool,
        "family": "g2",
        "instanceType": "g2-standard-8",
        "arch": "amd64",
        "version": OLD[1:],
        "accelerator": "nvidia-l4",
        "gpuDriver": "default",
    }
    assert dict(record.group) == {"model": "m1"}


def test_predictions_hit_miss_none(env: Env) -> None:
    take_snapshot(env)
    same = env.annotations(env.pod("same"))
    assert same["snapready.io/restore-prediction"] == "hit"
    assert same["snapready.io/restore-snapshot"] == "snap-1"

    env_only = env.annotations(env.pod("env", container={"env": [{"name": "X", "value": "2"}]}))
    assert env_only["snapready.io/restore-prediction"] == "hit", "env is not hashed"

    new_image = env.pod("image", container={"image": "registry.example/llm:v2"})
    decision = env.mutate(new_image)
    annotations = jsonpatch.apply_patch(new_image, list(decision.patch))["metadata"]["annotations"]
    assert annotations["snapready.io/restore-prediction"] == "miss"
    assert annotations["snapready.io/restore-snapshot"] == "snap-1"
    assert "spec.containers[0].image" in annotations["snapready.io/restore-reason"]
    assert any("will cold-start" in w and "containers[0].image" in w for w in decision.warnings)

    other_group = env.annotations(env.pod("m2", labels={"model": "m2"}))
    assert other_group["snapready.io/restore-prediction"] == "none"

    pinned = env.annotations(env.pod("pin", annotations={"podsnapshot.gke.io/ps-name": "snap-1"}))
    assert pinned["snapready.io/restore-prediction"] == "hit"
    missing = env.annotations(env.pod("pin2", annotations={"podsnapshot.gke.io/ps-name": "nope"}))
    assert missing["snapready.io/restore-prediction"] == "none"
    assert "nope" in missing["snapready.io/restore-reason"]


def test_no_ready_snapshot_predicts_none(env: Env) -> None:
    annotations = env.annotations(env.pod("first"))
    assert annotations["snapready.io/restore-prediction"] == "none"
    assert "no Ready snapshot of llm-policy" in annotations["snapready.io/restore-reason"]
    assert "snapready.io/restore-snapshot" not in annotations


def test_pinned_node_pool_upgraded_misses_with_both_versions(env: Env) -> None:
    take_snapshot(env)
    set_node_version(env.api, env.node, NEW)
    wait_for(
        "upgrade seen",
        lambda: NEW[1:] in env.source.state().node_pools[env.pool].versions,
        timeout=10,
    )
    annotations = env.annotations(env.pod("after-upgrade"))
    assert annotations["snapready.io/restore-prediction"] == "miss"
    reason = annotations["snapready.io/restore-reason"]
    assert NEW[1:] in reason and OLD[1:] in reason and env.pool in reason


def test_rootfs_only_policy_ignores_the_fingerprint(env: Env) -> None:
    take_snapshot(env)
    custom = client.CustomObjectsApi(env.api)
    custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        env.namespace,
        "podsnapshotpolicies",
        "llm-policy",
        {"spec": {"snapshotScope": "rootfs-only"}},
    )
    wait_for(
        "rootfs-only seen",
        lambda: (
            env.source.state().policies.select(env.namespace, {"app": "llm"})[0].scope
            == "rootfs-only"
        ),
        timeout=10,
    )
    changed = env.annotations(env.pod("rootfs", container={"image": "registry.example/llm:v3"}))
    assert changed["snapready.io/restore-prediction"] == "hit"


def test_on_miss_deny_refuses_a_pod_that_would_cold_start(
    env: Env, control_plane: ControlPlane
) -> None:
    take_snapshot(env)
    settings = kube_settings(env.identity, env.namespace, restore={"on_miss": "deny"})
    strict = Engine(settings=settings, state=env.source.state)
    decision = env.mutate(env.pod("image", container={"image": "registry.example/llm:v2"}), strict)
    assert not decision.allowed
    assert "will cold-start" in (decision.message or "")
    assert env.mutate(env.pod("same"), strict).allowed


def deployment_of(env: Env, pod: dict[str, Any]) -> AdmissionRequest:
    """A CREATE of Deployment ``llm`` whose template is ``pod``'s labels and spec."""
    template = {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": env.namespace},
        "spec": {"selector": {"matchLabels": {"app": "llm"}}, "template": template},
    }
    return AdmissionRequest.model_validate(
        {
            "uid": secrets.token_hex(4),
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "namespace": env.namespace,
            "operation": "CREATE",
            "object": deployment,
        }
    )


def test_rollout_warning_names_the_fields_and_the_count(env: Env) -> None:
    take_snapshot(env)
    request = deployment_of(env, env.pod("ignored", container={"image": "registry.example/llm:v2"}))
    deployment = request.object
    decision = admit(request, "validate", env.engine)
    warning = next(w for w in decision.warnings if "rollout will cold-start" in w)
    assert "1 Ready snapshot(s) of llm-policy" in warning
    assert "spec.containers[0].image" in warning
    same = copy.deepcopy(deployment)
    same["spec"]["template"]["spec"] = env.pod("x")["spec"]
    request2 = request.model_copy(update={"object": same})
    assert not any("rollout" in w for w in admit(request2, "validate", env.engine).warnings)


def test_a_matching_snapshot_of_a_pod_gvisor_cannot_restore_is_a_miss(env: Env) -> None:
    """The origin's init container ``fetch`` is the first to mount the emptyDir ``cache``: its
    snapshot is Ready and a new pod of the same spec matches it, but runsc refuses that
    restore (``tests/gvisor/test_pod_sandbox.py``) and a refused restore crash-loops. The pod
    and its Deployment are told so, with the snapshot, the container and the volume."""
    cache = {"name": "cache", "mountPath": "/cache"}
    spec = {
        "initContainers": [
            {"name": "fetch", "image": IMAGE, "command": ["true"], "volumeMounts": [cache]}
        ],
        "volumes": [{"name": "cache", "emptyDir": {}}],
    }
    take_snapshot(env, container={"volumeMounts": [cache]}, spec=spec)
    pod = env.pod("same", container={"volumeMounts": [cache]}, spec=spec)
    decision = env.mutate(pod)
    annotations = jsonpatch.apply_patch(pod, list(decision.patch))["metadata"]["annotations"]
    assert annotations["snapready.io/spec-hash"] == env.origin_hash
    assert annotations["snapready.io/restore-prediction"] == "miss"
    assert annotations["snapready.io/restore-snapshot"] == "snap-1"
    reason = annotations["snapready.io/restore-reason"]
    assert reason.startswith("gVisor cannot restore the pod: init container 'fetch' mounts ")
    assert "'cache'" in reason and reason.endswith("it matches snapshot snap-1")
    assert any(w.startswith("snapready: will fail to restore (snap-1)") for w in decision.warnings)

    warnings = admit(deployment_of(env, pod), "validate", env.engine).warnings
    assert any("this rollout's pods cannot restore (snap-1)" in w for w in warnings), warnings


def test_a_snapshot_taken_from_a_pod_gvisor_cannot_restore_is_a_miss_for_every_pod(
    env: Env,
) -> None:
    """The origin's ``fetch`` is a run-to-completion init container (helpers not injected, so
    that only ``restartPolicy`` tells the two pods apart, and it is not fingerprinted). The
    leader's SnapshotRecord keeps why gVisor cannot restore from that snapshot, through the
    CRD's schema, and a new pod whose ``fetch`` is a native sidecar, which matches the
    fingerprint, is told the snapshot can never restore."""
    cache = {"name": "cache", "mountPath": "/cache"}
    fetch = {"name": "fetch", "image": IMAGE, "command": ["true"], "volumeMounts": [cache]}
    spec = {"initContainers": [fetch], "volumes": [{"name": "cache", "emptyDir": {}}]}
    plain = {"snapready.io/inject": "false"}
    record = take_snapshot(env, container={"volumeMounts": [cache]}, spec=spec, annotations=plain)
    assert record["spec"]["restoreBlocker"] == (
        "init container 'fetch' mounts emptyDir 'cache' first and has exited by the checkpoint "
        "(init-emptydir)"
    )
    sidecar = {**spec, "initContainers": [{**fetch, "restartPolicy": "Always"}]}
    pod = env.pod("sidecar", container={"volumeMounts": [cache]}, spec=sidecar, annotations=plain)
    decision = env.mutate(pod)
    annotations = jsonpatch.apply_patch(pod, list(decision.patch))["metadata"]["annotations"]
    assert annotations["snapready.io/spec-hash"] == env.origin_hash
    assert annotations["snapready.io/restore-prediction"] == "miss"
    blocker = record["spec"]["restoreBlocker"]
    assert annotations["snapready.io/restore-reason"] == (
        f"gVisor cannot restore snapshot snap-1: its origin pod's {blocker}; delete that "
        "PodSnapshot"
    )
    fails = "snapready: will fail to restore from a snapshot no pod can restore (snap-1)"
    assert any(w.startswith(fails) for w in decision.warnings), decision.warnings


def test_file_mode_writes_no_prediction() -> None:
    engine = build_engine(make_settings())
    from tests.rules.test_table import ready_pod  # noqa: PLC0415

    request = AdmissionRequest.model_validate(
        {
            "uid": "f",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "snap",
            "operation": "CREATE",
            "object": ready_pod(),
        }
    )
    decision = admit(request, "mutate", engine)
    patched = jsonpatch.apply_patch(ready_pod(), list(decision.patch))
    assert patched["metadata"]["labels"]["snapready.io/selected"] == "true"
    assert "snapready.io/restore-prediction" not in patched["metadata"]["annotations"]


def test_hit_from_another_workloads_snapshot_is_warned(env: Env) -> None:
    # The origin is a replica of Deployment "decode", made by the Deployment and ReplicaSet
    # controllers from the admitted template; the new pod is a replica of "prefill" with the
    # same distilled spec (production-stack's prefill/decode, docs/gke-facts.md#section-9).
    pod = env.pod("template")
    template = jsonpatch.apply_patch(pod, list(env.mutate(pod).patch))
    template["spec"]["nodeName"] = env.node
    del template["metadata"]["name"], template["metadata"]["namespace"]
    del template["apiVersion"], template["kind"]
    deployment = {
        "metadata": {"name": "decode", "namespace": env.namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "llm", "model": "m1"}},
            "template": template,
        },
    }
    apps = client.AppsV1Api(env.api)
    apps.create_namespaced_deployment(env.namespace, client.V1Deployment.model_validate(deployment))

    def replica() -> str | None:
        pods = [p for p in env.source.state().pods.values() if p.namespace == env.namespace]
        owned = [p for p in pods if p.owner is not None and p.owner.name == "decode"]
        return owned[0].name if owned else None

    origin = wait_for("a replica of decode cached", replica, timeout=20)
    assert origin is not None
    custom = client.CustomObjectsApi(env.gke)  # as GKE
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodSnapshot",
        "metadata": {
            "name": "decode-snap",
            "annotations": {"podsnapshot.gke.io/origin-pod": origin},
        },
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
        GROUP,
        VERSION,
        env.namespace,
        "podsnapshots",
        "decode-snap",
        {"status": {"conditions": [ready]}},
    )

    def recorded() -> OriginRecord | None:
        view = env.source.state().snapshots.named(env.namespace, "decode-snap")
        return view.origin if view is not None and view.ready and view.origin else None

    record = wait_for("origin record with its workload", recorded, timeout=20)
    assert record is not None and record.workload is not None
    assert (record.workload.kind, record.workload.name) == ("Deployment", "decode")

    prefill = env.pod("prefill-7c9d5-x2x4k", labels={"pod-template-hash": "7c9d5"})
    prefill["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "prefill-7c9d5",
            "uid": "0b7c0d5e-0000-4000-8000-000000000001",
            "controller": True,
        }
    ]
    decision = env.mutate(prefill)
    annotations = jsonpatch.apply_patch(prefill, list(decision.patch))["metadata"]["annotations"]
    assert annotations["snapready.io/restore-prediction"] == "hit"
    [warning] = [w for w in decision.warnings if w.startswith("[cross-workload]")]
    assert "will restore the memory of Deployment decode" in warning
    assert "not of Deployment prefill" in warning

    # A replica of decode itself is no cross-workload hit.
    sibling = env.pod("decode-5f6b7-abcde", labels={"pod-template-hash": "5f6b7"})
    sibling["metadata"]["ownerReferences"] = [
        {**prefill["metadata"]["ownerReferences"][0], "name": "decode-5f6b7"}
    ]
    assert not [w for w in env.mutate(sibling).warnings if "cross-workload" in w]

    strict = env.engine.settings.restore.model_copy(update={"cross_workload": "deny"})
    settings = env.engine.settings.model_copy(update={"restore": strict})
    refused = env.mutate(prefill, Engine(settings=settings, state=env.source.state))
    assert not refused.allowed
    assert "Deployment decode" in (refused.message or "")


def test_checkpoint_window_reads_the_pdb_cache(env: Env) -> None:
    # A Deployment of the workload-trigger policy is warned until a PDB holding its pods at
    # zero disruptions is listed by the PodDisruptionBudget cache.
    pod = env.pod("template")
    template = {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "source", "namespace": env.namespace},
        "spec": {"selector": {"matchLabels": {"app": "llm"}}, "template": template},
    }

    def window_warnings() -> list[str]:
        request = AdmissionRequest.model_validate(
            {
                "uid": secrets.token_hex(4),
                "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                "namespace": env.namespace,
                "operation": "CREATE",
                "object": deployment,
            }
        )
        decision = admit(request, "validate", env.engine)
        return [w for w in decision.warnings if w.startswith("[checkpoint-window]")]

    wait_for("the PDB cache listed", lambda: env.source.state().disruption_budgets is not None, 10)
    [warning] = window_warnings()
    assert "maxUnavailable: 0" in warning
    body = {
        "metadata": {"name": "source", "namespace": env.namespace},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "llm"}}},
    }
    client.PolicyV1Api(env.api).create_namespaced_pod_disruption_budget(
        env.namespace, client.V1PodDisruptionBudget.model_validate(body)
    )
    wait_for("the PDB seen", lambda: not window_warnings(), 10)
