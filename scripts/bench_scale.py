"""snapready's cluster caches at scale on a real control plane (``make bench-scale``).

Starts two envtest control planes (etcd + kube-apiserver + kube-controller-manager of
``tests/envtest/controlplane.py``, on 127.0.0.1, each in its own folder of a temporary directory):

* ``empty``: GKE's Pod snapshot CRDs, the gVisor RuntimeClass, one namespace ``bench-000`` with
  the bench's PodSnapshotPolicy and its storage config, nothing else (the review's pod must be
  selected on both clusters, or the two servers would run different code);
* ``scale``: the same plus ``--namespaces`` namespaces (each with a policy), ``--nodes`` GKE-like
  Nodes (20 node pools of G2/A2/A3/N2/C3/E2/T2A machines with GKE's labels, taints, capacity and
  ``status.nodeInfo`` set through the status subresource), ``--pods`` pods stamped as snapready
  stamps them (label ``snapready.io/selected: "true"``, annotations ``snapready.io/spec-hash``,
  ``policy``, ``restore-prediction``/``-snapshot``/``-reason``; review 03's gVisor pod spec in six
  model variants, ~3 KB sent; ``spec.nodeName`` set, status Running/Ready set through the status
  subresource) and ``--snapshots`` PodSnapshots (``spec.policyName``,
  ``podsnapshot.gke.io/origin-pod``, Ready condition through the status subresource, and for 9
  in 10 a ``snapready.io/origin`` record built with ``webhook.pod.fields.field_digests`` and
  ``fingerprint`` of the origin pod).

Objects are created directly (no webhook is registered), by ``--concurrency`` threads, each with
its own ``kubernetes.client.ApiClient`` sending raw JSON. kube-controller-manager is stopped
(by pid) once the namespaces have their ``default`` ServiceAccount: with no kubelets its node
lifecycle controller would mark every node unreachable after ~50 s and then every pod not ready
(20,000 pod updates), and its garbage collector would delete the pods of the ReplicaSets that do
not exist; the bench measures a settled cluster, not that churn.

Then ``snapready serve --source kube --kubeconfig <admin kubeconfig>`` (static scope, leader
election on, HTTPS on a free port with ``snapready certs`` certificates, metrics on a free port)
runs against each cluster with the same settings. Measured: seconds from process start to
``/readyz`` 200 (every cache synced), when each cache finished its list (from the server's log),
RSS (``VmRSS``) and peak RSS (``VmHWM``) of the process after sync and ``--settle`` seconds later,
CPU seconds; then ``--requests`` ``POST /mutate`` of review 03 (adapted to ``bench-000``) per
server from a separate client process over one keep-alive HTTPS connection, in alternating rounds
(the order flips every round, so drift on a shared machine hits both alike). Latencies: the
server's own in-handler ``durationMs`` (its ``admission`` log lines: from reading the request to
the decision) and the client's round trip. With ``--stages`` (default) the scale cluster is also
measured after the nodes and after the pods, so the RSS each kind adds can be told apart; with
``--heap on`` (default ``auto``: when an RSS target is missed) a child process syncs the same
caches in-process under ``tracemalloc`` and prints what each cache retains per object.

Usage: ``python scripts/bench_scale.py [--nodes 2000] [--pods 20000] [--snapshots 5000]
[--namespaces 50] [--quick] [--concurrency 24] [--requests 2000] [--rounds 8] [--settle 30]
[--no-stages] [--heap auto|on|off] [--keep DIR] [--timeout 3600]``
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import hashlib
import http.client
import itertools
import json
import os
import random
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import urllib3  # noqa: E402
import yaml  # noqa: E402
from bench_cluster import terminated_as_interrupt  # noqa: E402

from tests.envtest.controlplane import (  # noqa: E402
    ControlPlane,
    ProcessRecord,
    find_assets,
    free_port,
    start_time,
    start_with_retries,
    stop_processes,
)
from webhook.kube.snapshots import OriginRecord  # noqa: E402
from webhook.pod.distill import fingerprint  # noqa: E402
from webhook.pod.fields import field_digests  # noqa: E402

Obj = dict[str, Any]

REVIEW = ROOT / "tests" / "data" / "reviews" / "03-pod-create-gvisor-l4x4-gpu4.json"
CRDS = ROOT / "tests" / "data" / "crds" / "podsnapshot.gke.io.yaml"
SNAPSHOT_API = "/apis/podsnapshot.gke.io/v1"
PREFIX = "snapready.io/"
POLICY = "llm-policy"
STORAGE_CONFIG = "snapshots-us-central1"
BUCKET = "snapready-snapshots-us-central1"
GKE_VERSION = "v1.35.3-gke.1234000"
REQUEST_TIMEOUT = 60.0
MIB = 1024 * 1024

# Targets of ../shared/docs/design.md "Targets".
TARGET_RSS_SCALE_MIB = 250.0
TARGET_RSS_EMPTY_MIB = 150.0
TARGET_SYNC_S = 60.0
TARGET_P99_RATIO = 1.2
"""In-handler p99 at scale / on the empty cluster counted as "unchanged" (see the README)."""

DEFAULTS = {"nodes": 2000, "pods": 20000, "snapshots": 5000, "namespaces": 50}
QUICK = {"nodes": 200, "pods": 2000, "snapshots": 500, "namespaces": 10}


# --------------------------------------------------------------------------------------------
# What the cluster holds


@dataclass(frozen=True)
class Pool:
    """A GKE node pool of the bench cluster."""

    name: str
    instance_type: str
    family: str
    cpus: int
    memory_gi: int
    accelerator: str = ""
    gpus: int = 0
    arch: str = "amd64"
    sandbox: bool = True
    version: str = GKE_VERSION
    driver: str = "default"
    """``cloud.google.com/gke-gpu-driver-version`` of GPU pools (a pool setting)."""


POOLS = (
    Pool("l4x4-a", "g2-standard-48", "g2", 48, 192, "nvidia-l4", 4),
    Pool("l4x4-b", "g2-standard-48", "g2", 48, 192, "nvidia-l4", 4),
    Pool("l4x4-c", "g2-standard-48", "g2", 48, 192, "nvidia-l4", 4, version="v1.34.9-gke.1100000"),
    Pool("l4x4-spot", "g2-standard-48", "g2", 48, 192, "nvidia-l4", 4),
    Pool("l4x1-a", "g2-standard-8", "g2", 8, 32, "nvidia-l4", 1),
    Pool("l4x1-b", "g2-standard-8", "g2", 8, 32, "nvidia-l4", 1),
    Pool("l4x1-c", "g2-standard-16", "g2", 16, 64, "nvidia-l4", 1),
    Pool("l4x2", "g2-standard-24", "g2", 24, 96, "nvidia-l4", 2),
    Pool("l4x8", "g2-standard-96", "g2", 96, 384, "nvidia-l4", 8, driver="latest"),
    Pool("a100-a", "a2-highgpu-1g", "a2", 12, 85, "nvidia-tesla-a100", 1),
    Pool("a100-b", "a2-highgpu-1g", "a2", 12, 85, "nvidia-tesla-a100", 1),
    Pool("a100-80", "a2-ultragpu-1g", "a2", 12, 170, "nvidia-a100-80gb", 1),
    Pool("h100-a", "a3-highgpu-1g", "a3", 26, 234, "nvidia-h100-80gb", 1),
    Pool("h100-b", "a3-highgpu-1g", "a3", 26, 234, "nvidia-h100-80gb", 1),
    Pool("cpu-n2-a", "n2-standard-16", "n2", 16, 64),
    Pool("cpu-n2-b", "n2-standard-16", "n2", 16, 64, version="v1.34.9-gke.1100000"),
    Pool("cpu-n2-c", "n2-standard-32", "n2", 32, 128),
    Pool("cpu-c3", "c3-standard-22", "c3", 22, 88),
    Pool("system", "e2-standard-8", "e2", 8, 32, sandbox=False),
    Pool("arm", "t2a-standard-8", "t2a", 8, 32, arch="arm64", sandbox=False),
)


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


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def suffix(*parts: object, length: int = 10) -> str:
    """A stable lowercase suffix, like the hashes in generated object names."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(alphabet[int(digest[i : i + 2], 16) % len(alphabet)] for i in range(0, 40, 2))[
        :length
    ]


def node_name(pool: Pool, index: int) -> str:
    """``gke-<cluster>-<pool>-<instance group>-<4 characters>``, unique per index."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    tail = "".join(alphabet[(index // len(alphabet) ** k) % len(alphabet)] for k in range(4))
    return f"gke-bench-{pool.name}-{suffix(pool.name, length=8)}-{tail}"


def node_objects(index: int) -> tuple[Obj, Obj]:
    """(Node as created, merge patch of its status) of node ``index``; pools round-robin."""
    pool = POOLS[index % len(POOLS)]
    name = node_name(pool, index)
    zone = ("us-central1-a", "us-central1-b", "us-central1-c")[index % 3]
    labels = {
        "beta.kubernetes.io/arch": pool.arch,
        "beta.kubernetes.io/instance-type": pool.instance_type,
        "beta.kubernetes.io/os": "linux",
        "cloud.google.com/gke-boot-disk": "pd-balanced",
        "cloud.google.com/gke-container-runtime": "containerd",
        "cloud.google.com/gke-cpu-scaling-level": str(pool.cpus),
        "cloud.google.com/gke-logging-variant": "DEFAULT",
        "cloud.google.com/gke-max-pods-per-node": "110",
        "cloud.google.com/gke-memory-gb-scaling-level": str(pool.memory_gi),
        "cloud.google.com/gke-netd-ready": "true",
        "cloud.google.com/gke-nodepool": pool.name,
        "cloud.google.com/gke-os-distribution": "cos",
        "cloud.google.com/gke-provisioning": "spot" if "spot" in pool.name else "standard",
        "cloud.google.com/gke-stack-type": "IPV4",
        "cloud.google.com/machine-family": pool.family,
        "cloud.google.com/private-node": "false",
        "failure-domain.beta.kubernetes.io/region": "us-central1",
        "failure-domain.beta.kubernetes.io/zone": zone,
        "kubernetes.io/arch": pool.arch,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": pool.instance_type,
        "topology.gke.io/zone": zone,
        "topology.kubernetes.io/region": "us-central1",
        "topology.kubernetes.io/zone": zone,
    }
    taints: list[Obj] = []
    capacity = {
        "cpu": str(pool.cpus),
        "ephemeral-storage": "98831908Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{pool.memory_gi * 1024 * 1024 - 2_000_000}Ki",
        "pods": "110",
    }
    if pool.sandbox:
        labels["sandbox.gke.io/runtime"] = "gvisor"
        taints.append({"key": "sandbox.gke.io/runtime", "value": "gvisor", "effect": "NoSchedule"})
    if pool.gpus:
        labels.update(
            {
                "cloud.google.com/gke-accelerator": pool.accelerator,
                "cloud.google.com/gke-accelerator-count": str(pool.gpus),
                "cloud.google.com/gke-gpu": "true",
                "cloud.google.com/gke-gpu-driver-version": pool.driver,
            }
        )
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
        capacity["nvidia.com/gpu"] = str(pool.gpus)
    node: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "container.googleapis.com/instance_id": str(7_000_000_000_000_000_000 + index),
                "csi.volume.kubernetes.io/nodeid": json.dumps(
                    {
                        "pd.csi.storage.gke.io": f"projects/bench/zones/{zone}/instances/{name}",
                        "filestore.csi.storage.gke.io": name,
                    }
                ),
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {
            "podCIDR": f"10.{64 + index // 256}.{index % 256}.0/24",
            "podCIDRs": [f"10.{64 + index // 256}.{index % 256}.0/24"],
            "providerID": f"gce://bench/{zone}/{name}",
            "taints": taints,
        },
    }
    return node, {"status": node_status(pool, index, capacity)}


def node_status(pool: Pool, index: int, capacity: Obj) -> Obj:
    """Status as a GKE kubelet and node-problem-detector report it."""
    now = datetime.now(UTC)
    beat, since = stamp(now), stamp(now - timedelta(days=3, minutes=index % 600))
    problems = (
        ("FrequentUnregisterNetDevice", "NoFrequentUnregisterNetDevice"),
        ("FrequentKubeletRestart", "NoFrequentKubeletRestart"),
        ("FrequentContainerdRestart", "NoFrequentContainerdRestart"),
        ("KernelDeadlock", "KernelHasNoDeadlock"),
        ("ReadonlyFilesystem", "FilesystemIsNotReadOnly"),
        ("MemoryPressure", "KubeletHasSufficientMemory"),
        ("DiskPressure", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "KubeletHasSufficientPID"),
    )
    conditions = [
        {
            "type": kind,
            "status": "False",
            "reason": reason,
            "message": f"{kind}: {reason}",
            "lastHeartbeatTime": beat,
            "lastTransitionTime": since,
        }
        for kind, reason in problems
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": beat,
            "lastTransitionTime": since,
        }
    )
    images = [
        {
            "names": [
                f"us-docker.pkg.dev/bench/images/{image}@sha256:{suffix(image, 64)}",
                f"us-docker.pkg.dev/bench/images/{image}:1.{index % 7}",
            ],
            "sizeBytes": 10_000_000 * (n + 1),
        }
        for n, image in enumerate(
            (
                "gke-metadata-server",
                "fluent-bit",
                "netd",
                "kube-proxy",
                "pause",
                "nvidia-gpu-device-plugin",
                "gcsfuse-csi-driver",
            )
        )
    ]
    allocatable = {**capacity, "cpu": f"{pool.cpus * 1000 - 220}m"}
    return {
        "addresses": [
            {"type": "InternalIP", "address": f"10.128.{index // 250}.{index % 250 + 2}"},
            {"type": "Hostname", "address": node_name(pool, index)},
        ],
        "allocatable": allocatable,
        "capacity": capacity,
        "conditions": conditions,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "images": images,
        "nodeInfo": {
            "architecture": pool.arch,
            "bootID": suffix("boot", index, length=32),
            "containerRuntimeVersion": "containerd://1.7.24",
            "kernelVersion": "6.6.72+",
            "kubeProxyVersion": pool.version,
            "kubeletVersion": pool.version,
            "machineID": suffix("machine", index, length=32),
            "operatingSystem": "linux",
            "osImage": "Container-Optimized OS from Google",
            "systemUUID": suffix("uuid", index, length=32),
        },
    }


def base_pod() -> Obj:
    """Review 03's pod as a client sends it (no API server additions, no kubectl bookkeeping)."""
    review = json.loads(REVIEW.read_text())
    pod: Obj = copy.deepcopy(review["request"]["object"])
    spec = pod["spec"]
    for key in (
        "serviceAccount",
        "nodeName",
        "tolerations",
        "priority",
        "enableServiceLinks",
        "preemptionPolicy",
        "schedulerName",
    ):
        spec.pop(key, None)
    spec["volumes"] = [v for v in spec["volumes"] if not v["name"].startswith("kube-api-access-")]
    for container in spec["containers"]:
        container["volumeMounts"] = [
            m for m in container["volumeMounts"] if not m["name"].startswith("kube-api-access-")
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": spec}


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


def snapshot_objects(index: int, plan: Plan, pool_of: dict[str, Pool]) -> tuple[Obj, Obj]:
    """(PodSnapshot as created, merge patch of its status): a random origin pod; 19 in 20
    Ready; 9 in 10 with snapready's origin record (seeded by ``index``: the same every run)."""
    rng = random.Random(index)  # noqa: S311 - reproducible test data, not security
    name, template, node = plan.pods[rng.randrange(len(plan.pods))]
    ready, recorded = rng.random() >= 0.05, rng.random() < 0.9
    snapshot = f"{POLICY}-{suffix(name, index, length=8)}"
    annotations = {"podsnapshot.gke.io/origin-pod": name}
    if recorded:
        pool = pool_of.get(node)
        record = OriginRecord(
            pod=name,
            spec_hash=template.spec_hash,
            fields=template.digests,
            node={
                "pool": pool.name if pool else None,
                "family": pool.family if pool else None,
                "instanceType": pool.instance_type if pool else None,
                "arch": pool.arch if pool else None,
                "version": pool.version.removeprefix("v") if pool else None,
                "accelerator": (pool.accelerator or None) if pool else None,
                "gpuDriver": pool.driver if pool and pool.gpus else None,
            },
            group={"model": template.model.name},
        )
        annotations[PREFIX + "origin"] = record.to_json()
    obj = {
        "apiVersion": "podsnapshot.gke.io/v1",
        "kind": "PodSnapshot",
        "metadata": {
            "name": snapshot,
            "namespace": template.namespace,
            "labels": {"podsnapshot.gke.io/policy": POLICY, "model": template.model.name},
            "annotations": annotations,
        },
        "spec": {"policyName": POLICY},
    }
    taken = datetime.now(UTC) - timedelta(minutes=10 + index % 5000)
    status = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": "Ready" if ready else "CheckpointInProgress",
                "message": "snapshot stored" if ready else "checkpoint in progress",
                "lastTransitionTime": stamp(taken + timedelta(seconds=50)),
            }
        ],
        "lastAccessTime": stamp(taken + timedelta(minutes=index % 600)),
        "observedGeneration": 1,
        "storageStatus": {
            "gcs": {"observedGCSPath": f"gs://{BUCKET}/snapshots/{template.namespace}/{snapshot}"}
        },
    }
    return obj, {"status": status}


def policy_objects(namespace: str) -> list[Obj]:
    return [
        {
            "apiVersion": "podsnapshot.gke.io/v1",
            "kind": "PodSnapshotPolicy",
            "metadata": {"name": POLICY, "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": {"app": "llm"}},
                "storageConfigName": STORAGE_CONFIG,
                "snapshotScope": "whole-pod",
                "triggerConfig": {"type": "workload", "postCheckpoint": "resume"},
                "retentionConfig": {"lastAccessTimeout": "30d"},
                "snapshotGroupingRules": {
                    "groupByLabelValue": {
                        "labels": ["model"],
                        "groupRetentionPolicy": {"maxSnapshotCountPerGroup": 3},
                    }
                },
            },
        }
    ]


# --------------------------------------------------------------------------------------------
# Raw API requests, one kubernetes ApiClient per thread


class Kube:
    """JSON requests to one control plane; each calling thread gets its own ``ApiClient``."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._local = threading.local()
        self._clients: list[Any] = []
        self._lock = threading.Lock()

    def _pool(self) -> Any:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self.plane.api_client()
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client.rest_client.pool_manager

    def request(
        self, method: str, path: str, body: Obj | None = None, *, patch: bool = False
    ) -> tuple[int, bytes]:
        """(status, body); connection errors, 429 and 5xx are retried 4 times."""
        data = json.dumps(body).encode() if body is not None else None
        content = "application/merge-patch+json" if patch else "application/json"
        headers = {"Content-Type": content, "Accept": "application/json"}
        for attempt in range(5):
            try:
                response = self._pool().request(
                    method,
                    self.plane.url + path,
                    body=data,
                    headers=headers,
                    retries=False,
                    timeout=urllib3.Timeout(connect=10, read=REQUEST_TIMEOUT),
                )
            except urllib3.exceptions.HTTPError:
                if attempt == 4:
                    raise
            else:
                if response.status not in (429, 500, 502, 503, 504) or attempt == 4:
                    return int(response.status), bytes(response.data)
            time.sleep(0.25 * (attempt + 1))
        raise AssertionError("unreachable")

    def ok(self, method: str, path: str, body: Obj | None = None, *, patch: bool = False) -> Obj:
        """The decoded answer; a create that finds the object (409, a retried POST) is fine."""
        status, data = self.request(method, path, body, patch=patch)
        if not (200 <= status < 300 or (method == "POST" and status == 409)):
            raise BenchError(f"{method} {path}: HTTP {status}: {data[:400]!r}")
        decoded: Obj = json.loads(data) if data else {}
        return decoded

    def close(self) -> None:
        for client in self._clients:
            client.close()


class BenchError(RuntimeError):
    """The bench cannot go on (the message says why)."""


def collection(obj: Obj) -> str:
    """The collection path ``obj`` is created in."""
    kind, namespace = obj["kind"], obj["metadata"].get("namespace")
    core = {"Namespace": "namespaces", "Node": "nodes", "Pod": "pods"}
    if kind in core:
        base = "/api/v1"
        plural = core[kind]
    elif kind == "RuntimeClass":
        return "/apis/node.k8s.io/v1/runtimeclasses"
    elif kind == "CustomResourceDefinition":
        return "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    else:
        plural = {"PodSnapshotPolicy": "podsnapshotpolicies"}.get(kind, kind.lower() + "s")
        base = SNAPSHOT_API
    return f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"


def create_with_status(kube: Kube, obj: Obj, status: Obj | None) -> None:
    path = collection(obj)
    kube.ok("POST", path, obj)
    if status is not None:
        kube.ok("PATCH", f"{path}/{obj['metadata']['name']}/status", status, patch=True)


def run_parallel(
    label: str,
    count: int,
    make: Callable[[int], tuple[Obj, Obj | None]],
    kube: Kube,
    *,
    concurrency: int,
    deadline: float,
) -> float:
    """Create ``count`` objects (``make(i)``: object and status patch) with ``concurrency``
    threads; progress every 5 s; returns the seconds it took."""
    tickets = itertools.count()
    done = itertools.count(1)
    finished = [0]
    errors: list[str] = []
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            index = next(tickets)
            if index >= count:
                return
            try:
                obj, status = make(index)
                create_with_status(kube, obj, status)
            except (BenchError, urllib3.exceptions.HTTPError) as error:
                errors.append(str(error))
                stop.set()
                return
            finished[0] = next(done)

    started = time.monotonic()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    last = started
    try:
        while any(thread.is_alive() for thread in threads):
            time.sleep(0.2)  # short sleeps: Ctrl-C is seen
            now = time.monotonic()
            if now > deadline:
                raise BenchError(f"--timeout reached while creating {label}")
            if now - last >= 5:
                last = now
                rate = finished[0] / (now - started)
                print(f"    {label}: {finished[0]}/{count} ({rate:.0f}/s)", flush=True)
    finally:
        stop.set()
    if errors:
        raise BenchError(f"creating {label}: {errors[0]}")
    return time.monotonic() - started


def wait_for(what: str, check: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def set_up_base(plane: ControlPlane, kube: Kube, namespaces: Sequence[str]) -> None:
    """CRDs, RuntimeClass, storage config, ``namespaces`` with a policy each; then stop
    kube-controller-manager once every namespace has its ``default`` ServiceAccount."""
    crds = [doc for doc in yaml.safe_load_all(CRDS.read_text()) if doc]
    for crd in crds:
        kube.ok("POST", collection(crd), crd)

    def established() -> bool:
        for crd in crds:
            got = kube.ok("GET", f"{collection(crd)}/{crd['metadata']['name']}")
            conditions = got.get("status", {}).get("conditions", [])
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
        return True

    wait_for("the CRDs to be Established", established)
    kube.ok(
        "POST",
        collection({"kind": "RuntimeClass", "metadata": {}}),
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "gvisor"},
            "handler": "gvisor",
            "scheduling": {
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
    kube.ok(
        "POST",
        f"{SNAPSHOT_API}/podsnapshotstorageconfigs",
        {
            "apiVersion": "podsnapshot.gke.io/v1",
            "kind": "PodSnapshotStorageConfig",
            "metadata": {"name": STORAGE_CONFIG},
            "spec": {"snapshotStorageConfig": {"gcs": {"bucket": BUCKET, "path": "snapshots"}}},
        },
    )
    for index, namespace in enumerate(namespaces):
        labels = {"team": f"team-{index % 7}"}
        if index % 5 == 4:
            labels[PREFIX + "enforcement"] = "warn"
        kube.ok(
            "POST",
            "/api/v1/namespaces",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": namespace, "labels": labels},
            },
        )
        for obj in policy_objects(namespace):
            kube.ok("POST", collection(obj), obj)
    for namespace in namespaces:
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/default"
        wait_for(f"ServiceAccount {namespace}/default", partial(exists, kube, path))
    stop_named(plane, "kube-controller-manager")


def exists(kube: Kube, path: str) -> bool:
    return kube.request("GET", path)[0] == 200


def stop_named(plane: ControlPlane, name: str) -> None:
    """Stop the recorded process ``name`` by pid and drop it from the descriptor."""
    records = [record for record in plane.processes if record.name == name]
    stop_processes(records, timeout=15)
    plane.processes = [record for record in plane.processes if record.name != name]
    plane.save()


# --------------------------------------------------------------------------------------------
# snapready processes


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
class Server:
    """A running ``snapready serve``."""

    label: str
    plane: ControlPlane
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    began: float
    began_wall: float
    figures: Figures


def proc_status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in MiB."""
    values: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def start_server(label: str, plane: ControlPlane, certs: Path, tmp: Path) -> Server:
    """``snapready serve --source kube`` against ``plane`` as admin; recorded in the plane's
    descriptor, so its watchdog stops it too if this script dies."""
    port, metrics = free_port(), free_port()
    log = tmp / f"snapready-{label}.log"
    snapready = Path(sys.executable).parent / "snapready"
    argv = [
        str(snapready),
        "serve",
        "--source",
        "kube",
        "--kubeconfig",
        str(plane.admin_kubeconfig),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--cert-file",
        str(certs / "tls.crt"),
        "--key-file",
        str(certs / "tls.key"),
        "--metrics-port",
        str(metrics),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SNAPREADY_", "KUBE"))}
    env["SNAPREADY_SERVER__DRAIN_SECONDS"] = "0"  # stop at once; no effect while serving
    began_wall, began = time.time(), time.monotonic()
    with log.open("wb") as output:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
    plane.processes.append(
        ProcessRecord(f"snapready-{label}", process.pid, start_time(process.pid), str(log))
    )
    plane.save()
    return Server(label, plane, process, port, log, began, began_wall, Figures(label))


def readyz(server: Server, ca: Path) -> int:
    context = ssl.create_default_context(cafile=str(ca))
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=2)
    try:
        connection.request("GET", "/readyz")
        return connection.getresponse().status
    except OSError:
        return 0
    finally:
        connection.close()


def wait_ready(server: Server, ca: Path, timeout: float) -> None:
    """Poll ``/readyz`` every 50 ms; fill in ready time, RSS and per-cache list times."""
    while True:
        if server.process.poll() is not None:
            tail = server.log.read_text(errors="replace")[-3000:]
            raise BenchError(
                f"snapready {server.label} exited with {server.process.returncode}:\n{tail}"
            )
        if readyz(server, ca) == 200:
            break
        if time.monotonic() - server.began > timeout:
            raise BenchError(
                f"snapready {server.label} not ready after {timeout:.0f} s; log {server.log}"
            )
        time.sleep(0.05)
    figures = server.figures
    figures.ready_s = time.monotonic() - server.began
    memory = proc_status(server.process.pid)
    figures.rss_sync_mib, figures.hwm_sync_mib = memory["VmRSS"], memory["VmHWM"]
    figures.cpu_sync_s = cpu_seconds(server.process.pid)
    time.sleep(0.3)  # the log is flushed line by line; give it a moment
    for entry in log_entries(server.log):
        message = str(entry.get("msg", ""))
        if ": listed " in message:
            cache, _, rest = message.partition(": listed ")
            moment = datetime.strptime(entry["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
            figures.listed[cache] = (moment.timestamp() - server.began_wall, int(rest.split()[0]))


def settle(server: Server, seconds: float) -> None:
    cpu = cpu_seconds(server.process.pid)
    time.sleep(seconds)
    memory = proc_status(server.process.pid)
    server.figures.rss_settled_mib, server.figures.hwm_settled_mib = (
        memory["VmRSS"],
        memory["VmHWM"],
    )
    server.figures.cpu_settle_s = cpu_seconds(server.process.pid) - cpu


def stop_server(server: Server) -> None:
    stop_named(server.plane, f"snapready-{server.label}")
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.process.wait(2)


def log_entries(path: Path, offset: int = 0) -> Iterator[Obj]:
    with path.open("rb") as handle:
        handle.seek(offset)
        for line in handle:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    yield entry


# --------------------------------------------------------------------------------------------
# Admission latency: a client process per round, one keep-alive HTTPS connection


def run_client(port: int, ca: str, body_file: str, count: int) -> None:
    """(``--client``) POST the review ``count`` times; print latencies and the last answer."""
    body = Path(body_file).read_bytes()
    context = ssl.create_default_context(cafile=ca)
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    latencies: list[float] = []
    answer: Obj = {}
    for _ in range(count):
        started = time.perf_counter()
        connection.request("POST", "/mutate", body, headers)
        response = connection.getresponse()
        data = response.read()
        latencies.append((time.perf_counter() - started) * 1000)
        if response.status != 200:
            raise SystemExit(f"HTTP {response.status}: {data[:300]!r}")
        answer = json.loads(data)
    connection.close()
    print(json.dumps({"latencies": latencies, "answer": answer}))


@dataclass
class Latency:
    """Latencies (ms) of one server over every round."""

    handler: list[float] = field(default_factory=list)
    client: list[float] = field(default_factory=list)
    round_p99: list[float] = field(default_factory=list)
    """In-handler p99 of each round (how much one server's p99 moves between rounds)."""
    answer: Obj = field(default_factory=dict)


def one_round(
    server: Server, ca: Path, body: Path, count: int
) -> tuple[list[float], list[float], Obj]:
    offset = server.log.stat().st_size
    out = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--client",
            str(server.port),
            str(ca),
            str(body),
            str(count),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if out.returncode != 0:
        raise BenchError(f"client against {server.label}: {out.stderr[-800:]}")
    result = json.loads(out.stdout)
    time.sleep(0.4)  # admission lines are flushed every 100 ms
    handler = [
        float(entry["durationMs"])
        for entry in log_entries(server.log, offset)
        if entry.get("msg") == "admission" and entry.get("endpoint") == "mutate"
    ]
    if len(handler) != count:
        raise BenchError(f"{server.label}: {len(handler)} admission lines for {count} requests")
    return handler, list(result["latencies"]), dict(result["answer"])


def measure_latency(
    servers: Sequence[Server], ca: Path, body: Path, requests: int, rounds: int
) -> dict[str, Latency]:
    results = {server.label: Latency() for server in servers}
    for server in servers:  # warm-up, not counted
        one_round(server, ca, body, max(50, requests // 10))
    per_round = max(1, requests // rounds)
    for number in range(rounds):
        order = list(servers) if number % 2 == 0 else list(reversed(servers))
        for server in order:
            handler, client, answer = one_round(server, ca, body, per_round)
            result = results[server.label]
            result.handler += handler
            result.client += client
            result.round_p99.append(pct(handler, 99))
            result.answer = answer
        print(
            f"    round {number + 1}/{rounds}: "
            + ", ".join(f"{s.label} p99 {results[s.label].round_p99[-1]:.2f} ms" for s in order),
            flush=True,
        )
    return results


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, round(q / 100 * len(ordered) + 0.5 - 1e-9))
    return ordered[min(len(ordered), rank) - 1]


def review_body(tmp: Path) -> Path:
    """Review 03 in ``bench-000`` (a namespace of both clusters, with the bench policy)."""
    review = json.loads(REVIEW.read_text())
    review["request"]["namespace"] = namespace_name(0)
    review["request"]["object"]["metadata"]["namespace"] = namespace_name(0)
    path = tmp / "review.json"
    path.write_text(json.dumps(review))
    return path


def describe_answer(answer: Obj) -> str:
    """What the last answer said: allowed, and the ``restore-*`` annotations the patch wrote."""
    response = answer.get("response") or {}
    text = f"allowed={response.get('allowed')}"
    patch = response.get("patch")
    if patch:
        import base64  # noqa: PLC0415

        ops = json.loads(base64.b64decode(patch))
        written: dict[str, Any] = {}
        for op in ops:
            key = op.get("path", "").rsplit("/", 1)[-1].replace("~1", "/")
            value = op.get("value")
            written.update(value if isinstance(value, dict) else {key: value})
        notes = [
            f"{key.removeprefix(PREFIX)}={str(value)[:90]}"
            for key, value in sorted(written.items())
            if key.startswith(PREFIX + "restore-")
        ]
        text += f", {len(ops)} patch ops: {'; '.join(notes)}"
    return text


# --------------------------------------------------------------------------------------------
# Heap of the caches, in-process (``--heap-child KUBECONFIG``)


def deep_size(root: object, seen: set[int]) -> tuple[int, int]:
    """(bytes, objects) reachable from ``root`` not in ``seen`` (which it extends); containers,
    dataclass instances and their attributes are followed; classes and modules are not."""
    total = count = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type) or type(obj).__name__ == "module":
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        count += 1
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif hasattr(obj, "__dict__"):
            stack.append(vars(obj))
        elif hasattr(obj, "__slots__"):
            stack.extend(getattr(obj, s) for s in obj.__slots__ if hasattr(obj, s))
    return total, count


def heap_child(kubeconfig: str) -> None:
    """Sync every cache in-process under tracemalloc; print JSON of what each retains, then
    what listing each resource alone costs at its peak (the raw objects of every page)."""
    import tracemalloc  # noqa: PLC0415

    from webhook.base.config import load_settings  # noqa: PLC0415
    from webhook.cluster.caches import ClusterSource, timing_from  # noqa: PLC0415
    from webhook.cluster.client import KubeTransport, api_client  # noqa: PLC0415

    settings = load_settings(source={"kind": "kube", "kubeconfig": kubeconfig})
    result: Obj = {"rss_before": proc_status(os.getpid())["VmRSS"]}
    tracemalloc.start(1)
    client = api_client(settings)
    transport = KubeTransport(client, settings.source.request_timeout_seconds)
    source = ClusterSource(transport, prefix=settings.prefix, timing=timing_from(settings.source))
    began = time.monotonic()
    source.start()
    while not source.synced():
        time.sleep(0.05)
    result["synced_s"] = time.monotonic() - began
    gc.collect()
    result["traced_current"], result["traced_peak"] = tracemalloc.get_traced_memory()
    memory = proc_status(os.getpid())
    result["rss"], result["hwm"] = memory["VmRSS"], memory["VmHWM"]
    held = tracemalloc.take_snapshot().statistics("lineno")[:10]
    seen: set[int] = set()
    result["caches"] = {}
    for name, reflector in source.reflectors.items():
        items_bytes, items_objects = deep_size(reflector.items, seen)
        result["caches"][name] = {
            "count": len(reflector.items),
            "retained": items_bytes + deep_size(reflector.view, seen)[0],
            "objects": items_objects,
        }
    result["state_rest"] = deep_size(source.state(), seen)[0]
    result["top"] = [
        {
            "where": f"{stat.traceback[0].filename.removeprefix(str(ROOT) + '/')}"
            f":{stat.traceback[0].lineno}",
            "bytes": stat.size,
            "blocks": stat.count,
        }
        for stat in held
    ]
    source.stop()
    for name, reflector in source.reflectors.items():
        if reflector.served and reflector.path:
            result["caches"][name].update(list_cost(transport, reflector.path, settings))
    client.close()
    print(json.dumps(result))


def list_cost(transport: Any, path: str, settings: Any) -> dict[str, int]:
    """Peak traced bytes of ``transport.list(path)`` alone, and the JSON size of what it got."""
    import tracemalloc  # noqa: PLC0415

    import orjson  # noqa: PLC0415

    gc.collect()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    objects, _ = transport.list(path, page_size=settings.source.list_page_size)
    peak = tracemalloc.get_traced_memory()[1] - base
    size = len(orjson.dumps(objects))
    return {"list_peak": peak, "json": size}


def heap_report(plane: ControlPlane) -> str:
    out = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--heap-child",
            str(plane.admin_kubeconfig),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
        cwd=ROOT,
    )
    if out.returncode != 0:
        return f"heap analysis failed: {out.stderr[-1500:]}"
    data = json.loads(out.stdout.strip().splitlines()[-1])
    lines = [
        f"in-process sync under tracemalloc: {data['synced_s']:.1f} s; traced after sync "
        f"{data['traced_current'] / MIB:.1f} MiB, traced peak during the lists "
        f"{data['traced_peak'] / MIB:.1f} MiB; process RSS after sync {data['rss']:.0f} MiB "
        f"(peak {data['hwm']:.0f} MiB; {data['rss_before']:.0f} MiB before the caches started)",
        "",
        "| cache | objects | retained MiB | retained B/object | Python objects/item "
        "| API JSON B/object | list peak B/object (that list alone) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, cache in data["caches"].items():
        n = cache["count"]

        def per(key: str, n: int = n, cache: Obj = cache) -> str:
            return f"{cache[key] / n:,.0f}" if n and key in cache else "-"

        lines.append(
            f"| {name} | {n} | {cache['retained'] / MIB:.2f} | {per('retained')} | "
            f"{per('objects')} | {per('json')} | {per('list_peak')} |"
        )
    lines.append(f"| (rest of ClusterState) | | {data['state_rest'] / MIB:.2f} | | | | |")
    lines += ["", "largest allocation sites still held after sync (tracemalloc, by line):", ""]
    lines += [
        f"  {t['bytes'] / MIB:7.2f} MiB {t['blocks']:>8} blocks  {t['where']}" for t in data["top"]
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Report


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def figures_table(rows: Sequence[tuple[str, Figures]]) -> str:
    lines = [
        "| run | ready s | RSS at sync MiB | peak RSS MiB | RSS +settle MiB | CPU to sync s "
        "| CPU while settling s |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, f in rows:
        lines.append(
            f"| {label} | {f.ready_s:.1f} | {f.rss_sync_mib:.0f} | "
            f"{max(f.hwm_sync_mib, f.hwm_settled_mib):.0f} | "
            f"{f.rss_settled_mib:.0f} | {f.cpu_sync_s:.1f} | {f.cpu_settle_s:.1f} |"
        )
    return "\n".join(lines)


def listed_line(figures: Figures) -> str:
    order = sorted(figures.listed.items(), key=lambda item: item[1][0])
    return ", ".join(f"{name} {count} in {at:.1f} s" for name, (at, count) in order)


@dataclass
class Outcome:
    """Everything the report prints."""

    sizes: Sizes
    create_s: dict[str, float]
    empty: Figures
    scale: Figures
    stages: list[tuple[str, Figures]]
    """(kind just added, figures) after the nodes and after the pods."""
    latency: dict[str, Latency]
    requests: int
    rounds: int
    versions: str


def report(outcome: Outcome) -> bool:
    """Print the tables; True when every RSS target is met."""
    sizes, empty, scale = outcome.sizes, outcome.empty, outcome.scale
    total = sum(outcome.create_s.values())
    print(f"\n{outcome.versions}")
    print(
        "\ncreated (no webhook registered): "
        + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in outcome.create_s.items())
        + f"; total {total:.0f} s"
    )
    print("\nsnapready serve --source kube (static scope, leader election on):\n")
    stages = [
        (
            f"stage: {sizes.namespaces} policies + {sizes.nodes} nodes"
            if kind == "nodes"
            else f"stage: + {sizes.pods} pods",
            figures,
        )
        for kind, figures in outcome.stages
    ]
    rows = [
        ("empty cluster (1 namespace + policy)", empty),
        *stages,
        (f"scale: + {sizes.snapshots} PodSnapshots (all {sizes.namespaces} namespaces)", scale),
    ]
    print(figures_table(rows))
    for label, figures in rows:
        print(f"  lists of {label}: {listed_line(figures)}")
    print(
        f"  RSS after the latency rounds: empty {empty.rss_after_load_mib:.0f} MiB, scale "
        f"{scale.rss_after_load_mib:.0f} MiB"
    )
    lat_e, lat_s = outcome.latency["empty"], outcome.latency["scale"]
    print(
        f"\nPOST /mutate of review 03 in {namespace_name(0)} ({outcome.requests} per server, "
        f"{outcome.rounds} alternating rounds, one keep-alive connection):\n"
    )
    print(
        "| server | in-handler p50 / p99 / max ms | client p50 / p99 ms "
        "| in-handler p99 per round ms |"
    )
    print("|---|---|---|---|")
    for label, lat in (("empty", lat_e), ("scale", lat_s)):
        rounds = " / ".join(f"{v:.2f}" for v in lat.round_p99)
        print(
            f"| {label} | {pct(lat.handler, 50):.2f} / {pct(lat.handler, 99):.2f} / "
            f"{max(lat.handler):.1f} | "
            f"{pct(lat.client, 50):.2f} / {pct(lat.client, 99):.2f} | {rounds} |"
        )
    p50_ratio = pct(lat_s.handler, 50) / pct(lat_e.handler, 50)
    p99_ratio = pct(lat_s.handler, 99) / pct(lat_e.handler, 99)
    client_ratio = pct(lat_s.client, 99) / pct(lat_e.client, 99)
    per_round = sorted(s / e for s, e in zip(lat_s.round_p99, lat_e.round_p99, strict=True))
    print(
        f"  ratios scale / empty: in-handler p50 {p50_ratio:.2f}, p99 {p99_ratio:.2f}; "
        f"client p99 {client_ratio:.2f}; in-handler p99 per round "
        f"{per_round[0]:.2f}-{per_round[-1]:.2f} (median {pct(per_round, 50):.2f})"
    )
    print(f"  answers: empty {describe_answer(lat_e.answer)}")
    print(f"           scale {describe_answer(lat_s.answer)}")
    rss_scale = max(scale.rss_sync_mib, scale.rss_settled_mib)
    rss_empty = max(empty.rss_sync_mib, empty.rss_settled_mib)
    checks = [
        (
            f"RSS at scale <= {TARGET_RSS_SCALE_MIB:.0f} MiB (after sync / +settle; peak)",
            f"{scale.rss_sync_mib:.0f} / {scale.rss_settled_mib:.0f}; "
            f"peak {scale.hwm_settled_mib:.0f}",
            rss_scale <= TARGET_RSS_SCALE_MIB,
        ),
        (
            f"RSS on the empty cluster <= {TARGET_RSS_EMPTY_MIB:.0f} MiB",
            f"{empty.rss_sync_mib:.0f} / {empty.rss_settled_mib:.0f}; "
            f"peak {empty.hwm_settled_mib:.0f}",
            rss_empty <= TARGET_RSS_EMPTY_MIB,
        ),
        (
            f"caches synced <= {TARGET_SYNC_S:.0f} s after start",
            f"{scale.ready_s:.1f} s",
            scale.ready_s <= TARGET_SYNC_S,
        ),
        (
            f"in-handler p99 unchanged (scale / empty <= {TARGET_P99_RATIO})",
            f"{p99_ratio:.2f}",
            p99_ratio <= TARGET_P99_RATIO,
        ),
    ]
    print("\n| target (design.md) | measured | |\n|---|---|---|")
    for name, measured, ok in checks:
        print(f"| {name} | {measured} | {verdict(ok)} |")
    if outcome.stages:
        print_costs(outcome)
    return checks[0][2] and checks[1][2]


def print_costs(outcome: Outcome) -> None:
    """RSS each kind added, from the stages (after sync; peak in brackets)."""
    chain = [("empty", outcome.empty), *outcome.stages, ("snapshots", outcome.scale)]
    counts = {
        "nodes": outcome.sizes.nodes,
        "pods": outcome.sizes.pods,
        "snapshots": outcome.sizes.snapshots,
    }
    print("\nRSS added per kind (stage after minus stage before; RSS after sync, peak RSS):")
    for (_, before), (kind, after) in itertools.pairwise(chain):
        n = counts[kind]
        rss = after.rss_sync_mib - before.rss_sync_mib
        hwm = after.hwm_sync_mib - before.hwm_sync_mib
        per = f"{rss * MIB / n:,.0f} B/object (peak {hwm * MIB / n:,.0f} B)" if n else ""
        print(f"  + {kind}: {rss:+.0f} MiB RSS, {hwm:+.0f} MiB peak; {per}")


# --------------------------------------------------------------------------------------------
# Main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="snapready's caches at scale on a real control plane: sync time, RSS and "
        "in-handler admission latency against an empty cluster. See the module docstring."
    )
    for name, default in DEFAULTS.items():
        parser.add_argument(f"--{name}", type=int, default=None, help=f"default {default}")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: " + "/".join(map(str, QUICK.values())) + ", 400 requests, settle 10 s",
    )
    parser.add_argument("--concurrency", type=int, default=24, help="create threads (default 24)")
    parser.add_argument("--requests", type=int, default=None, help="POST /mutate per server (2000)")
    parser.add_argument("--rounds", type=int, default=8, help="alternating latency rounds (8)")
    parser.add_argument(
        "--settle", type=float, default=None, help="seconds before the second RSS (30)"
    )
    parser.add_argument(
        "--no-stages",
        dest="stages",
        action="store_false",
        help="skip the RSS measurements after the nodes and after the pods",
    )
    parser.add_argument(
        "--heap",
        choices=["auto", "on", "off"],
        default="auto",
        help="in-process tracemalloc of the caches (auto: when an RSS target is missed)",
    )
    parser.add_argument(
        "--ready-timeout", type=float, default=600, help="give snapready SECONDS to sync"
    )
    parser.add_argument("--keep", type=Path, metavar="DIR", help="work in DIR and keep it (logs)")
    parser.add_argument("--timeout", type=float, default=3600, help="give up after SECONDS")
    parser.add_argument("--client", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--heap-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    preset = QUICK if args.quick else DEFAULTS
    for name, value in preset.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.requests is None:
        args.requests = 400 if args.quick else 2000
    if args.settle is None:
        args.settle = 10.0 if args.quick else 30.0
    if args.quick:
        args.rounds = min(args.rounds, 4)
    return args


def main() -> int:
    args = parse_args()
    if args.client:
        port, ca, body, count = args.client
        run_client(int(port), ca, body, int(count))
        return 0
    if args.heap_child:
        heap_child(args.heap_child)
        return 0
    try:
        with terminated_as_interrupt():
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                return bench_in(args.keep.resolve(), args)
            with tempfile.TemporaryDirectory(prefix="snapready-bench-scale-") as tmp:
                return bench_in(Path(tmp), args)
    except KeyboardInterrupt as interrupt:
        why = str(interrupt) or "Ctrl-C"
        print(f"interrupted ({why}); every process was stopped", file=sys.stderr)
        return 130
    except BenchError as error:
        print(f"bench-scale failed: {error}", file=sys.stderr)
        return 1


@dataclass
class Run:
    """One run: its folder, flags, and what it started (for the clean-up)."""

    tmp: Path
    args: argparse.Namespace
    began: float = field(default_factory=time.monotonic)
    planes: list[ControlPlane] = field(default_factory=list)
    servers: list[Server] = field(default_factory=list)
    kubes: list[Kube] = field(default_factory=list)

    @property
    def certs(self) -> Path:
        return self.tmp / "certs"

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.began:5.0f} s] {text}", flush=True)

    def serve(self, label: str, plane: ControlPlane, settle_s: float) -> Server:
        """Start snapready on ``plane``; wait until ready; RSS now and ``settle_s`` later."""
        server = start_server(label, plane, self.certs, self.tmp)
        self.servers.append(server)
        wait_ready(server, self.certs / "ca.crt", self.args.ready_timeout)
        f = server.figures
        self.say(
            f"  snapready {label}: ready in {f.ready_s:.1f} s, RSS {f.rss_sync_mib:.0f} MiB "
            f"(peak {f.hwm_sync_mib:.0f}); lists: {listed_line(f)}"
        )
        settle(server, settle_s)
        self.say(f"  +{settle_s:.0f} s: RSS {f.rss_settled_mib:.0f} MiB")
        return server

    def stop(self, server: Server) -> None:
        stop_server(server)
        self.servers.remove(server)


def bench_in(tmp: Path, args: argparse.Namespace) -> int:
    """The whole run inside ``tmp``; every process is stopped by pid before returning."""
    run = Run(tmp, args)
    try:
        return measure(run)
    finally:
        stopping = time.monotonic()
        for server in run.servers:
            with contextlib.suppress(Exception):
                stop_server(server)
        for kube in run.kubes:
            kube.close()
        for plane in run.planes:
            plane.stop(remove=not args.keep)
        print(f"stopped every process by pid in {time.monotonic() - stopping:.1f} s", flush=True)


def start_planes(run: Run) -> tuple[dict[str, ControlPlane], dict[str, Kube], str]:
    """Both control planes, their clients, the empty cluster set up, the certificates."""
    assets = find_assets(run.tmp / "envtest-build.log")
    planes = {}
    for label in ("empty", "scale"):
        run.say(f"starting the {label} control plane ({assets})")
        plane = start_with_retries(assets, run.tmp / label, run.tmp / f"{label}.json")
        run.planes.append(plane)
        planes[label] = plane
    kubes = {label: Kube(plane) for label, plane in planes.items()}
    run.kubes += kubes.values()
    set_up_base(planes["empty"], kubes["empty"], [namespace_name(0)])
    subprocess.run(
        [str(Path(sys.executable).parent / "snapready"), "certs", "--out", str(run.certs)],
        check=True,
        capture_output=True,
    )
    return planes, kubes, describe_versions(planes["scale"], assets)


def measure(run: Run) -> int:
    args = run.args
    sizes = Sizes(args.nodes, args.pods, args.snapshots, args.namespaces)
    plan = make_plan(sizes)
    planes, kubes, versions = start_planes(run)
    run.say("snapready on the empty cluster")
    empty = run.serve("empty", planes["empty"], args.settle)

    run.say(f"scale cluster: {sizes.namespaces} namespaces with a policy each")
    set_up_base(planes["scale"], kubes["scale"], plan.namespaces)
    pool_of = {name: pool for pool in POOLS for name in plan.nodes_by_pool.get(pool.name, [])}
    kinds: list[tuple[str, int, Callable[[int], tuple[Obj, Obj | None]]]] = [
        ("nodes", sizes.nodes, node_objects),
        ("pods", sizes.pods, lambda i: pod_objects(*plan.pods[i], i)),
        ("snapshots", sizes.snapshots, lambda i: snapshot_objects(i, plan, pool_of)),
    ]
    create_s: dict[str, float] = {}
    stages: list[tuple[str, Figures]] = []
    for name, count, make in kinds:
        run.say(f"creating {count} {name} (+ status) with {args.concurrency} threads")
        create_s[name] = run_parallel(
            name,
            count,
            make,
            kubes["scale"],
            concurrency=args.concurrency,
            deadline=run.began + args.timeout,
        )
        run.say(f"  {count} {name} in {create_s[name]:.0f} s ({count / create_s[name]:.0f}/s)")
        if args.stages and name != "snapshots":
            stage = run.serve(f"stage-{name}", planes["scale"], min(args.settle, 10.0))
            run.stop(stage)
            stages.append((name, stage.figures))

    database = planes["scale"].directory / "etcd" / "member" / "snap" / "db"
    with contextlib.suppress(OSError):
        run.say(f"etcd database {database.stat().st_size / MIB:.0f} MiB (quota: etcd's 2 GiB)")
    run.say("snapready on the scale cluster")
    scale = run.serve("scale", planes["scale"], args.settle)
    run.say(f"admission latency: {args.requests} POST /mutate per server, {args.rounds} rounds")
    body = review_body(run.tmp)
    latency = measure_latency(
        [empty, scale], run.certs / "ca.crt", body, args.requests, args.rounds
    )
    for server in (empty, scale):
        server.figures.rss_after_load_mib = proc_status(server.process.pid)["VmRSS"]
    outcome = Outcome(sizes, create_s, empty.figures, scale.figures, stages, latency,
                      args.requests, args.rounds, versions)  # fmt: skip
    rss_met = report(outcome)
    if args.heap == "on" or (args.heap == "auto" and not rss_met):
        for server in list(run.servers):
            run.stop(server)
        run.say("heap of the caches on the scale cluster (in-process, tracemalloc):")
        print(heap_report(planes["scale"]))
    print(f"\ntotal wall time {time.monotonic() - run.began:.0f} s")
    return 0


def describe_versions(plane: ControlPlane, assets: Path) -> str:
    version = json.loads(plane.get("/version")[1]).get("gitVersion", "?")
    etcd = subprocess.run(
        [str(assets / "etcd"), "--version"], capture_output=True, text=True, check=False
    ).stdout.split("\n", 1)[0]
    tree = subprocess.run(
        ["git", "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    ).stdout.strip()
    return (
        f"snapready tree {tree or '?'}, Python {sys.version.split()[0]}, kube-apiserver "
        f"{version}, {etcd.replace('Version: ', 'etcd ')}, {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    sys.exit(main())
