"""The workloads of ``make bench-scale``: models, their pod templates, and the pods of the plan.

Six models (model 0 is review 03's gVisor + 4 x L4 pod, in every namespace, so the bench review
has snapshots), four per namespace; every pod is stamped as snapready stamps it (label
``snapready.io/selected``, annotations ``spec-hash``, ``policy``, ``restore-*``), bound to a node of
one of its model's pools, Running and Ready. The :class:`Plan` decides every object before
anything is created.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bench.harness.objects import API_SERVER_DEFAULTS, Obj, client_pod
from bench.scale.nodes import POOLS, node_name, stamp, suffix
from webhook.pod.distill import fingerprint
from webhook.pod.fields import field_digests

PREFIX = "snapready.io/"
POLICY = "llm-policy"


@dataclass(frozen=True)
class Model:
    """A workload (one Deployment-like template per namespace) and the pools it runs on."""

    name: str
    pools: tuple[str, ...]
    instance_type: str
    accelerator: str
    gpus: int
    cpu: str
    memory: str
    tensor_parallel: int


MODELS = (
    Model(
        "llama-3-8b-instruct",
        ("l4x4-a", "l4x4-b", "l4x4-c", "l4x4-spot"),
        "g2-standard-48",
        "nvidia-l4",
        4,
        "40",
        "160Gi",
        4,
    ),
    Model(
        "mistral-7b-instruct", ("l4x1-a", "l4x1-b"), "g2-standard-8", "nvidia-l4", 1, "6", "24Gi", 1
    ),
    Model(
        "llama-3-70b-instruct",
        ("h100-a", "h100-b"),
        "a3-highgpu-1g",
        "nvidia-h100-80gb",
        1,
        "20",
        "200Gi",
        1,
    ),
    Model(
        "gemma-2-9b-it",
        ("a100-a", "a100-b"),
        "a2-highgpu-1g",
        "nvidia-tesla-a100",
        1,
        "10",
        "72Gi",
        1,
    ),
    Model("phi-3-mini", ("l4x1-c",), "g2-standard-16", "nvidia-l4", 1, "12", "48Gi", 1),
    Model("bge-embedder", ("cpu-n2-a", "cpu-n2-b", "cpu-n2-c"), "", "", 0, "8", "16Gi", 1),
)
"""Model 0 is review 03's pod: it runs in every namespace, so the bench review has snapshots."""
MODELS_PER_NAMESPACE = 4


@dataclass(frozen=True)
class Sizes:
    """How much the scale cluster holds."""

    nodes: int
    pods: int
    snapshots: int
    namespaces: int


def namespace_name(index: int) -> str:
    return f"bench-{index:03d}"


def base_pod() -> Obj:
    """Review 03's pod as a client sends it (no API server additions, no kubectl bookkeeping)."""
    pod = client_pod("03", drop=API_SERVER_DEFAULTS)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": pod["spec"]}


@dataclass
class Template:
    """One model's pod in one namespace, with what is the same for all its replicas."""

    namespace: str
    model: Model
    replica_set: str
    pod: Obj
    spec_hash: str
    digests: dict[str, str]


def make_template(namespace: str, model: Model, base: Obj) -> Template:
    pod = copy.deepcopy(base)
    replica_set = f"{model.name}-{suffix(namespace, model.name)}"
    container = pod["spec"]["containers"][0]
    if model.name != MODELS[0].name:  # model 0 stays exactly review 03's pod
        digest = hashlib.sha256(model.name.encode()).hexdigest()
        container["image"] = container["image"].rsplit("@", 1)[0] + f"@sha256:{digest}"
        container["args"] = [
            f"--model=/models/{model.name}",
            f"--tensor-parallel-size={model.tensor_parallel}",
            "--port=8000",
        ]
        container["resources"] = {"requests": {"cpu": model.cpu, "memory": model.memory}}
        selector: Obj = {"sandbox.gke.io/runtime": "gvisor"}
        if model.gpus:
            gpus = str(model.gpus)
            container["resources"]["requests"]["nvidia.com/gpu"] = gpus
            container["resources"]["limits"] = {"nvidia.com/gpu": gpus}
            selector.update(
                {
                    "cloud.google.com/gke-accelerator": model.accelerator,
                    "node.kubernetes.io/instance-type": model.instance_type,
                }
            )
        else:
            selector["cloud.google.com/machine-family"] = "n2"
        pod["spec"]["nodeSelector"] = selector
        pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = f"{model.name}-weights"
    container["env"].append(
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    )
    pod["metadata"] = {"labels": {"app": "llm", "model": model.name}}
    return Template(namespace, model, replica_set, pod, fingerprint(pod), field_digests(pod))


@dataclass
class Plan:
    """Every object of the scale cluster, decided before anything is created."""

    sizes: Sizes
    namespaces: list[str]
    templates: dict[str, list[Template]]
    pods: list[tuple[str, Template, str]] = field(default_factory=list)
    """(pod name, template, node name)."""
    nodes_by_pool: dict[str, list[str]] = field(default_factory=dict)


def make_plan(sizes: Sizes) -> Plan:
    base = base_pod()
    namespaces = [namespace_name(i) for i in range(sizes.namespaces)]
    templates = {}
    for index, namespace in enumerate(namespaces):
        others = [
            MODELS[1 + (index + k) % (len(MODELS) - 1)] for k in range(MODELS_PER_NAMESPACE - 1)
        ]
        templates[namespace] = [make_template(namespace, m, base) for m in (MODELS[0], *others)]
    plan = Plan(sizes, namespaces, templates)
    for index in range(sizes.nodes):
        pool = POOLS[index % len(POOLS)]
        plan.nodes_by_pool.setdefault(pool.name, []).append(node_name(pool, index))
    counters: dict[str, itertools.count[int]] = {}
    for index in range(sizes.pods):
        namespace = namespaces[index % len(namespaces)]
        choices = templates[namespace]
        template = choices[(index // len(namespaces)) % len(choices)]
        pools = [p for p in template.model.pools if plan.nodes_by_pool.get(p)]
        nodes = [n for p in pools for n in plan.nodes_by_pool[p]] or ["gke-bench-missing"]
        replica = next(counters.setdefault(template.replica_set + namespace, itertools.count()))
        name = (
            f"{template.replica_set}-{suffix(namespace, template.replica_set, replica, length=5)}"
        )
        plan.pods.append((name, template, nodes[(index // 7) % len(nodes)]))
    return plan


def pod_objects(name: str, template: Template, node: str, index: int) -> tuple[Obj, Obj]:
    """(pod as created, merge patch of its status) for replica ``name`` of ``template``."""
    pod = copy.deepcopy(template.pod)
    outcome = ("hit", "hit", "miss", "none")[index % 4]
    reasons = {
        "hit": "snapshot matches: spec hash, machine family g2, node version and GPU driver",
        "miss": "spec.containers[0].image differs",
        "none": f"no Ready snapshot of {POLICY} yet (first start checkpoints)",
    }
    annotations = {
        PREFIX + "policy": POLICY,
        PREFIX + "spec-hash": template.spec_hash,
        PREFIX + "restore-prediction": outcome,
        PREFIX + "restore-reason": reasons[outcome],
    }
    if outcome == "hit":
        annotations[PREFIX + "restore-snapshot"] = (
            f"{POLICY}-{suffix(template.replica_set, length=8)}"
        )
    pod["metadata"] = {
        "name": name,
        "namespace": template.namespace,
        "labels": {
            **pod["metadata"]["labels"],
            "app.kubernetes.io/name": template.model.name,
            "app.kubernetes.io/part-of": "inference",
            "pod-template-hash": template.replica_set.rsplit("-", 1)[1],
            PREFIX + "selected": "true",
        },
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": template.replica_set,
                "uid": f"{suffix(template.namespace, length=8)}-0000-4000-8000-"
                f"{suffix(template.replica_set, length=12)}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    pod["spec"]["nodeName"] = node
    started = datetime.now(UTC) - timedelta(minutes=5 + index % 3000)
    ready = stamp(started + timedelta(seconds=40 + index % 90))
    conditions = [
        {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": at}
        for kind, at in (
            ("PodReadyToStartContainers", stamp(started + timedelta(seconds=3))),
            ("Initialized", stamp(started + timedelta(seconds=1))),
            ("Ready", ready),
            ("ContainersReady", ready),
            ("PodScheduled", stamp(started)),
        )
    ]
    if index % 3 == 0:
        conditions.append(
            {
                "type": "PodRestored",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": stamp(started + timedelta(seconds=2)),
                "message": f"restored from PodSnapshot {POLICY}-{suffix(name, length=8)}",
            }
        )
    container = pod["spec"]["containers"][0]
    ip = f"10.{64 + index // 65536}.{index // 256 % 256}.{index % 256}"
    status = {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": "10.128.0.2",
        "hostIPs": [{"ip": "10.128.0.2"}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": stamp(started),
        "qosClass": "Burstable",
        "containerStatuses": [
            {
                "name": container["name"],
                "ready": True,
                "started": True,
                "restartCount": 0,
                "image": container["image"],
                "imageID": container["image"],
                "containerID": f"containerd://{suffix(name, 'c', length=64)}",
                "state": {"running": {"startedAt": stamp(started + timedelta(seconds=4))}},
                "lastState": {},
            }
        ],
    }
    return pod, {"status": status}
