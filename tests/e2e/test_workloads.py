"""Pods made by the real kube-controller-manager flow through snapready (chart defaults: no
helper injection), and carry the fingerprint ``snapready hash`` predicts for their controller.

Deployment: every ReplicaSet pod (generateName, ownerReferences) gets one identical spec-hash,
also after a scale. StatefulSet with volumeClaimTemplates: replica N gets the claim volume
``<template>-<set>-N``, so each replica hashes differently (``snapready hash --ordinal N``).
Indexed Job: the ``batch.kubernetes.io/job-completion-index`` label is hashed
(docs/gke-facts.md#section-3), so each index has its own value (``--ordinal N``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import SPEC_HASH, Env, environment, must, pod_spec
from tests.envtest.controlplane import ControlPlane
from tests.support import kube_raw
from tests.support.kube_raw import Obj
from tests.support.webhooks import wait_until

pytestmark = pytest.mark.e2e

INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


@pytest.fixture(scope="module")
def env(
    control_plane: ControlPlane,
    podsnapshot_crds: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Env]:
    """snapready with the chart's default values, serving one namespace (policy ``app=llm``)."""
    with environment(
        control_plane, tmp_path_factory.mktemp("e2e-workloads"), {"work": {}}
    ) as created:
        yield created


def template(workload: str) -> Obj:
    """A compliant pod template labelled ``app=llm`` (selected) and ``workload=<workload>``."""
    return {"metadata": {"labels": {"app": "llm", "workload": workload}}, "spec": pod_spec()}


def pods_of(env: Env, namespace: str, workload: str) -> list[Obj]:
    """The live pods labelled ``workload=<workload>`` (raw JSON, sorted by name)."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    reply = kube_raw.request(env.api, "GET", path, query={"labelSelector": f"workload={workload}"})
    # List items carry no apiVersion/kind; kubectl adds them back when it prints a list.
    items = [{"apiVersion": "v1", "kind": "Pod", **pod} for pod in must(reply)["items"]]
    return sorted(items, key=lambda pod: pod["metadata"]["name"])


def wait_pods(env: Env, namespace: str, workload: str, count: int) -> list[Obj]:
    """Wait until exactly ``count`` pods of ``workload`` exist; return them."""

    def ready() -> list[Obj] | None:
        found = pods_of(env, namespace, workload)
        return found if len(found) == count else None

    return wait_until(f"{count} pods of {workload}", ready, timeout=45)


def hashes(pods: list[Obj]) -> list[str]:
    """The ``spec-hash`` annotation of each pod (fails when one is missing)."""
    return [pod["metadata"]["annotations"][SPEC_HASH] for pod in pods]


def owner_kinds(pod: Obj) -> list[str]:
    """The kinds of a pod's controller ownerReferences."""
    return [ref["kind"] for ref in pod["metadata"].get("ownerReferences", []) if ref["controller"]]


def test_deployment_replicas_share_one_spec_hash_before_and_after_a_scale(env: Env) -> None:
    namespace = env.namespaces["work"]
    deployment: Obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "llm", "workload": "web"}},
            "template": template("web"),
        },
    }
    must(env.create(copy.deepcopy(deployment), namespace))
    pods = wait_pods(env, namespace, "web", 3)
    for pod in pods:
        assert owner_kinds(pod) == ["ReplicaSet"]
        assert pod["metadata"]["generateName"].startswith("web-")
    (value,) = set(hashes(pods))
    assert env.hash(deployment, *pods) == [value] * 4

    scale_path = f"/apis/apps/v1/namespaces/{namespace}/deployments/web/scale"
    patch = {"spec": {"replicas": 4}}
    reply = kube_raw.request(
        env.api, "PATCH", scale_path, patch, content_type="application/merge-patch+json"
    )
    assert reply.ok, reply.body
    assert set(hashes(wait_pods(env, namespace, "web", 4))) == {value}

    # One mutating and one validating call per pod: nothing re-invokes snapready when it only
    # writes annotations. The ReplicaSets are not sent (chart validateReplicaSets=false).
    # The API server generates the name between the mutating and the validating phase.
    generate_name = pods[0]["metadata"]["generateName"]
    names = {pod["metadata"]["name"] for pod in pods_of(env, namespace, "web")}
    calls = env.admissions(kind="Pod")
    mutated = [c for c in calls if c.get("generateName") == generate_name]
    validated = [c for c in calls if c["name"] in names]
    assert [(c["endpoint"], c["decision"]) for c in mutated] == [("mutate", "patched")] * 4
    assert [(c["endpoint"], c["decision"]) for c in validated] == [("validate", "allowed")] * 4
    assert env.admissions(kind="ReplicaSet") == []
    assert [c["operation"] for c in env.admissions(kind="Deployment", name="web")] == ["CREATE"]


def test_statefulset_replicas_hash_per_ordinal(env: Env) -> None:
    namespace = env.namespaces["work"]
    statefulset: Obj = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 2,
            "serviceName": "db",
            "podManagementPolicy": "Parallel",  # no nodes: OrderedReady would stop at db-0
            "selector": {"matchLabels": {"app": "llm", "workload": "db"}},
            "template": template("db"),
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            ],
        },
    }
    must(env.create(copy.deepcopy(statefulset), namespace))
    pods = wait_pods(env, namespace, "db", 2)
    assert [pod["metadata"]["name"] for pod in pods] == ["db-0", "db-1"]
    assert all(owner_kinds(pod) == ["StatefulSet"] for pod in pods)
    claims = [
        volume["persistentVolumeClaim"]["claimName"]
        for pod in pods
        for volume in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in volume
    ]
    assert claims == ["data-db-0", "data-db-1"]
    recorded = hashes(pods)
    assert len(set(recorded)) == 2, "each replica has its own claim volume, hence fingerprint"
    assert env.hash(*pods) == recorded
    for ordinal in range(2):
        assert env.hash(statefulset, args=("--ordinal", str(ordinal))) == [recorded[ordinal]]


def test_indexed_job_pods_hash_per_completion_index(env: Env) -> None:
    namespace = env.namespaces["work"]
    pod_template = template("batch")
    pod_template["spec"]["restartPolicy"] = "Never"
    job: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "batch"},
        "spec": {
            "completionMode": "Indexed",
            "completions": 3,
            "parallelism": 3,
            "template": pod_template,
        },
    }
    must(env.create(copy.deepcopy(job), namespace))
    pods = wait_pods(env, namespace, "batch", 3)
    pods.sort(key=lambda pod: int(pod["metadata"]["labels"][INDEX_LABEL]))
    assert [pod["metadata"]["labels"][INDEX_LABEL] for pod in pods] == ["0", "1", "2"]
    assert all(owner_kinds(pod) == ["Job"] for pod in pods)
    recorded = hashes(pods)
    assert len(set(recorded)) == 3, "the completion index label is hashed: one value per index"
    template_value, *live = env.hash(job, *pods)
    assert live == recorded
    assert template_value not in recorded  # the template itself has no index label
    for index in range(3):
        assert env.hash(job, args=("--ordinal", str(index))) == [recorded[index]]


def test_a_volume_named_like_the_token_volume_with_other_content_is_hashed(env: Env) -> None:
    """Through the real API server: a pod that projects a Secret under a ``kube-api-access-*``
    name (the ServiceAccount plugin then adds no token volume of its own) gets another
    spec-hash than its twin without that volume, and the CLI agrees; the twin's random token
    volume is left out (``webhook.kube.token_volume``)."""
    namespace = env.namespaces["work"]
    crafted = template("crafted")
    crafted["spec"]["volumes"] = [
        {
            "name": "kube-api-access-zzzzz",
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"path": "token"}},
                    {"secret": {"name": "db-creds"}},
                ]
            },
        }
    ]
    crafted["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "kube-api-access-zzzzz", "mountPath": "/etc/db"}
    ]
    for name, pod in (("crafted", crafted), ("twin", template("crafted"))):
        pod["metadata"]["name"] = name
        must(env.create({"apiVersion": "v1", "kind": "Pod", **pod}, namespace))
    pods = {p["metadata"]["name"]: p for p in wait_pods(env, namespace, "crafted", 2)}
    volumes = {name: [v["name"] for v in pod["spec"]["volumes"]] for name, pod in pods.items()}
    assert volumes["crafted"] == ["kube-api-access-zzzzz"]  # the plugin added none
    (twin_token,) = volumes["twin"]
    assert twin_token.startswith("kube-api-access-") and twin_token != "kube-api-access-zzzzz"
    recorded = hashes([pods["crafted"], pods["twin"]])
    assert recorded[0] != recorded[1]
    assert env.hash(pods["crafted"], pods["twin"]) == recorded
