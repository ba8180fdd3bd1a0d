"""GKE and Kubernetes node label keys and extended resource names the rules read.

Sources: docs/gke-facts.md#section-5; GKE docs "About GPUs in GKE"
(``cloud.google.com/gke-accelerator``, ``gke-gpu-partition-size``, ``gke-gpu-sharing-strategy``),
"GKE Sandbox" and Kubernetes' well-known labels (``node.kubernetes.io/instance-type``,
``kubernetes.io/arch``).
"""

from __future__ import annotations

import functools

MACHINE_FAMILY = "cloud.google.com/machine-family"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LEGACY_INSTANCE_TYPE = "beta.kubernetes.io/instance-type"
ACCELERATOR = "cloud.google.com/gke-accelerator"
ACCELERATOR_COUNT = "cloud.google.com/gke-accelerator-count"
PARTITION_SIZE = "cloud.google.com/gke-gpu-partition-size"
SHARING_STRATEGY = "cloud.google.com/gke-gpu-sharing-strategy"
MAX_SHARED_CLIENTS = "cloud.google.com/gke-max-shared-clients-per-gpu"
NODE_POOL = "cloud.google.com/gke-nodepool"
SANDBOX_RUNTIME = "sandbox.gke.io/runtime"
"""Label (and NoSchedule taint) of GKE Sandbox nodes, value ``gvisor``; the ``gvisor``
RuntimeClass's ``scheduling`` puts both on every pod that names it (docs/gke-facts.md#section-1)."""
GPU_DRIVER_VERSION = "cloud.google.com/gke-gpu-driver-version"
"""Which GPU driver branch a node pool installs (``default``, ``latest``;
docs/gke-facts.md#section-3)."""
ORIGIN_POD = "podsnapshot.gke.io/origin-pod"
"""PodSnapshot annotation GKE sets: the pod it was taken from (same namespace)."""
ORIGIN_NODE = "podsnapshot.gke.io/origin-node"
"""PodSnapshot annotation GKE sets: the node the snapshot was taken on
(docs/gke-facts.md#section-10)."""
TRIGGERED_BY = "gke-pod-snapshot-triggered-by"
"""PodSnapshot label GKE sets: the PodSnapshotManualTrigger that made it
(docs/gke-facts.md#section-10)."""
RESTORE_FROM_POLICY = "podsnapshot.gke.io/restore-from-policy"
"""Pod annotation asking GKE to restore from a policy's snapshots; on a pod with no snapshot yet
GKE cold-starts it and disables its checkpointing (docs/gke-facts.md#section-9)."""
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
"""NVIDIA device plugin's mixed MIG strategy: a resource per profile (``nvidia.com/mig-1g.5gb``)."""
LATEST_DRIVER = "latest"
"""``cloud.google.com/gke-gpu-driver-version`` value of GKE's latest driver branch (570+)."""
PS_NAME = "podsnapshot.gke.io/ps-name"
"""Annotation on a pod pinning the PodSnapshot it must restore from."""
POD_RESTORED = "PodRestored"
"""Pod condition type GKE sets on a pod restored from a snapshot."""
COMPUTE_CLASS = "cloud.google.com/compute-class"
ARCHITECTURE = "kubernetes.io/arch"
TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
TPU_TOPOLOGY = "cloud.google.com/gke-tpu-topology"
GPU_RESOURCE = "nvidia.com/gpu"
TPU_RESOURCE = "google.com/tpu"
NODE_NAME = "field:metadata.name"
"""Pseudo key of the node names a term's ``matchFields`` selects (``metadata.name In``); ``:`` is
not allowed in label keys, so it never collides with a real label."""
LABEL_ALIASES: dict[str, str] = {
    LEGACY_INSTANCE_TYPE: INSTANCE_TYPE,
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
}
"""Legacy node labels read as their GA key (the kubelet and cloud node controller set both)."""


@functools.lru_cache(maxsize=1024)
def instance_family(instance_type: str) -> str:
    """Machine family of a GCE machine type: ``g2-standard-48`` -> ``g2``; ``custom-4-8192`` (an
    N1 custom machine type) -> ``n1``. The rules and the restore prediction read a pod's
    ``node.kubernetes.io/instance-type`` pin the same way."""
    prefix = instance_type.split("-", 1)[0].lower()
    return "n1" if prefix == "custom" else prefix


ACCELERATOR_FAMILIES: dict[str, frozenset[str]] = {
    "nvidia-l4": frozenset({"g2"}),
    "nvidia-rtx-pro-6000": frozenset({"g4"}),
    "nvidia-tesla-a100": frozenset({"a2"}),
    "nvidia-a100-80gb": frozenset({"a2"}),
    "nvidia-h100-80gb": frozenset({"a3"}),
    "nvidia-h100-mega-80gb": frozenset({"a3"}),
    "nvidia-h200-141gb": frozenset({"a3"}),
    "nvidia-b200": frozenset({"a4"}),
    "nvidia-gb200": frozenset({"a4x"}),
    "nvidia-tesla-t4": frozenset({"n1"}),
    "nvidia-tesla-v100": frozenset({"n1"}),
    "nvidia-tesla-p100": frozenset({"n1"}),
    "nvidia-tesla-p4": frozenset({"n1"}),
}
"""The machine family whose nodes carry each ``cloud.google.com/gke-accelerator`` value: Compute
Engine attaches each GPU model to one series (Compute Engine docs "GPU machine types": L4 on G2,
RTX PRO 6000 on G4, A100 on A2, H100/H100 Mega/H200 on A3, B200 on A4, GB200 on A4X, T4/V100/
P100/P4 on N1). What a node pool scaled to zero would run, when its nodes cannot say so (the
restore prediction, ``pod.pools.machine_fit``); an accelerator not listed is not known."""
