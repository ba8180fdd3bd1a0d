"""The 2,000 GKE-like Nodes of ``make bench-scale``'s scale cluster.

20 node pools of G2 (1/2/4/8 L4), A2, A3, N2, C3, E2 and T2A (arm64) machines, nodes assigned
round-robin; each Node with GKE's labels, taints, capacity and annotations, and a status as a GKE
kubelet and node-problem-detector report it (written through the status subresource). Names and
suffixes are derived from the index, so every run builds the same objects.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bench.harness.objects import Obj

GKE_VERSION = "v1.35.3-gke.1234000"
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


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


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def suffix(*parts: object, length: int = 10) -> str:
    """A stable lowercase suffix, like the hashes in generated object names."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()
    return "".join(ALPHABET[int(digest[i : i + 2], 16) % len(ALPHABET)] for i in range(0, 40, 2))[
        :length
    ]


def node_name(pool: Pool, index: int) -> str:
    """``gke-<cluster>-<pool>-<instance group>-<4 characters>``, unique per index."""
    tail = "".join(ALPHABET[(index // len(ALPHABET) ** k) % len(ALPHABET)] for k in range(4))
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
