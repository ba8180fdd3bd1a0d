"""Issue 23's rules through a real kube-apiserver, snapready installed from the chart.

One snapready per module (cluster mode, the chart's webhook configurations and RBAC); namespace
``enforce`` with ``llm-policy`` (``app=llm``, workload trigger) and, created by the trigger
tests, ``manual-policy`` (``app=manual``, manual trigger). The cluster has no nodes: pods stay
Pending unless a test writes their status (as the kubelet would) through ``pods/status``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Env, compliant_pod, environment, must, policy
from tests.envtest.controlplane import ControlPlane
from tests.support import kube_raw
from tests.support.kube_raw import Obj, Reply
from tests.support.webhooks import wait_until

pytestmark = pytest.mark.e2e

DRIVER = "cloud.google.com/gke-gpu-driver-version"


@pytest.fixture(scope="module")
def env(
    control_plane: ControlPlane,
    podsnapshot_crds: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Env]:
    """snapready serving the ``enforce`` namespace (``llm-policy`` selects ``app=llm``)."""
    with environment(
        control_plane, tmp_path_factory.mktemp("e2e-field-rules"), {"enforce": {}}
    ) as created:
        yield created


def gpu_pod(name: str, selector: dict[str, str], labels: dict[str, str] | None = None) -> Obj:
    """A compliant pod with one GPU and exactly ``selector`` as its nodeSelector."""
    pod = compliant_pod(name, labels)
    pod["spec"]["nodeSelector"] = dict(selector)
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    return pod


def rule_warnings(reply: Reply, rule: str) -> list[str]:
    return [w for w in reply.warnings if w.startswith(f"[{rule}]")]


def test_googles_g4_pod_is_admitted_without_findings(env: Env) -> None:
    selector = {
        "node.kubernetes.io/instance-type": "g4-standard-48",
        "cloud.google.com/gke-accelerator": "nvidia-rtx-pro-6000",
        DRIVER: "latest",
    }
    reply = env.create(gpu_pod("gemma-g4", selector), env.namespaces["enforce"])
    assert reply.ok, reply.body
    assert reply.warnings == (), reply.warnings


def test_default_driver_gpu_pod_is_warned_naming_the_driver(env: Env) -> None:
    pod = gpu_pod("l4-default-driver", {"node.kubernetes.io/instance-type": "g2-standard-8"})
    reply = env.create(pod, env.namespaces["enforce"])
    assert reply.ok, reply.body
    [warning] = rule_warnings(reply, "gpu-driver")
    assert "default GPU driver" in warning and f"{DRIVER}: latest" in warning


def test_restore_from_policy_is_warned(env: Env) -> None:
    pod = compliant_pod("restore-from-policy")
    pod["metadata"]["annotations"] = {"podsnapshot.gke.io/restore-from-policy": "llm-policy"}
    reply = env.create(pod, env.namespaces["enforce"])
    assert reply.ok, reply.body
    [warning] = rule_warnings(reply, "restore-from-policy")
    assert "first snapshot is never taken" in warning


# ---- manual triggers


def trigger(name: str, target: str) -> Obj:
    return {
        "apiVersion": "podsnapshot.gke.io/v1",
        "kind": "PodSnapshotManualTrigger",
        "metadata": {"name": name},
        "spec": {"targetPod": target},
    }


def running(env: Env, pod: Obj, namespace: str) -> None:
    """Create ``pod`` (stamped by snapready) and report it Running, as its kubelet would."""
    must(env.create(pod, namespace))
    path = kube_raw.object_path(env.api, pod, namespace=namespace, named=True) + "/status"
    status: dict[str, Any] = {"status": {"phase": "Running"}}
    reply = kube_raw.request(
        env.api, "PATCH", path, status, content_type="application/merge-patch+json"
    )
    must(reply)


@pytest.fixture(scope="module")
def manual(env: Env) -> str:
    """The ``enforce`` namespace with ``manual-policy`` (``app=manual``, manual trigger) seen by
    snapready (a pod it selects comes back stamped with that policy)."""
    namespace = env.namespaces["enforce"]
    body = copy.deepcopy(policy("manual-policy", {"app": "manual"}, env.storage_config))
    body["spec"]["triggerConfig"] = {"type": "manual"}
    must(env.create(body, namespace))

    def stamped() -> bool:
        reply = env.create(compliant_pod("probe", {"app": "manual"}), namespace, dry_run=True)
        return reply.ok and reply.annotations().get("snapready.io/policy") == "manual-policy"

    wait_until("snapready to see manual-policy", stamped, 30.0)
    return namespace


def test_trigger_on_a_missing_pod_is_refused(env: Env, manual: str) -> None:
    reply = env.create(trigger("typo", "no-such-pod"), manual)
    assert reply.status == 403, reply.body
    assert "[manual-trigger] spec.targetPod" in reply.message
    assert "does not exist" in reply.message


def test_trigger_on_a_pod_no_manual_policy_selects_is_refused(env: Env, manual: str) -> None:
    running(env, compliant_pod("workload-source"), manual)  # app=llm: llm-policy, workload

    def refused_for_the_policy() -> bool:
        reply = env.create(trigger("wrong", "workload-source"), manual, dry_run=True)
        return reply.status == 403 and "selected by no manual PodSnapshotPolicy" in reply.message

    wait_until("the trigger to be refused for its policy", refused_for_the_policy, 30.0)
    assert env.create(trigger("wrong", "workload-source"), manual).status == 403


def test_trigger_on_a_running_pod_of_a_manual_policy_is_admitted(env: Env, manual: str) -> None:
    running(env, compliant_pod("manual-source", {"app": "manual"}), manual)
    # The pod cache sees the Running status within its watch latency.
    wait_until(
        "the trigger to be admitted",
        lambda: env.create(trigger("good", "manual-source"), manual, dry_run=True).ok,
        30.0,
    )
    reply = env.create(trigger("good", "manual-source"), manual)
    assert reply.ok, reply.body
    [line] = env.admissions(kind="PodSnapshotManualTrigger", name="good", dryRun=None)[-1:]
    assert line["decision"] == "allowed"
    assert line["user"]  # the API server's userInfo.username of the creator


def test_trigger_on_a_pending_pod_is_refused(env: Env, manual: str) -> None:
    must(env.create(compliant_pod("pending-source", {"app": "manual"}), manual))

    def refused() -> bool:
        reply = env.create(trigger("early", "pending-source"), manual, dry_run=True)
        return reply.status == 403 and "not Running" in reply.message

    wait_until("the trigger on a Pending pod to be refused", refused, 30.0)
