"""``gpu-mig`` and ``gpu-sharing``: GPUs shared between pods.

MIG (multi-instance GPU) partitions are not supported by Pod snapshots (GKE "About GKE Pod
snapshots", docs/gke-facts.md#section-4): denied whether the pod selects a partition size itself,
asks for a MIG profile by resource name (``nvidia.com/mig-3g.20gb``, the NVIDIA device plugin's
mixed strategy; such a pod is a GPU pod), or pins a node pool or ComputeClass that has one.
Time-sharing and MPS are not named as unsupported (unconfirmed): ``rules.gpu_sharing_severity``
(warn by default). Pure module.
"""

from __future__ import annotations

from collections.abc import Iterator

from webhook.base.text import clip_all
from webhook.base.types import Finding
from webhook.kube.gke import GPU_RESOURCE, PARTITION_SIZE
from webhook.pod.context import PodContext
from webhook.rules.constraints import Constraint, fit
from webhook.rules.placement import Placement


def values_note(c: Constraint) -> str:
    """`` (a, b, c +2 more)``: the constraint's values, clipped; empty when it has none."""
    return f" ({clip_all(sorted(c.values))})" if c.values else ""


def _mig_fix(c: Constraint) -> str:
    """What to change for one MIG statement: the pod's own selector/affinity term, or its pin to
    a MIG node pool or ComputeClass (GKE: MIG is not supported by Pod snapshots)."""
    if c.source == "resources":
        return f"request whole GPUs ({GPU_RESOURCE}) instead of the MIG resource"
    if c.source == "nodeSelector":
        return f"remove the {PARTITION_SIZE} nodeSelector and request whole GPUs"
    if c.source == "node affinity":
        return f"remove the {PARTITION_SIZE} affinity term and request whole GPUs"
    if c.source.startswith("ComputeClass"):
        return "pin a ComputeClass without MIG and request whole GPUs"
    return "pin a node pool without MIG partitions and request whole GPUs"


def mig_findings(place: Placement) -> Iterator[Finding]:
    """``gpu-mig``: MIG partitions by selector, pinned node pool or ComputeClass."""
    for c in place.partition_sizes:
        fix = _mig_fix(c)
        text = fit(
            "gpu-mig",
            c.path,
            f"MIG partitions{values_note(c)}{c.where} are not supported by Pod snapshots; {fix}",
            f"MIG{values_note(c)}{c.where} is unsupported; {fix}",
            f"MIG{values_note(c)} is unsupported; {fix}",
            fix,
        )
        yield Finding(c.path, "gpu-mig", text)


def sharing_findings(ctx: PodContext, place: Placement) -> Iterator[Finding]:
    """``gpu-sharing``: time-sharing/MPS (severity ``rules.gpu_sharing_severity``, warn)."""
    severity = ctx.settings.rules.gpu_sharing_severity
    for c in place.sharing:
        fix = "prefer a whole GPU"
        text = fit(
            "gpu-sharing",
            c.path,
            f"GPU sharing{values_note(c)}{c.where} is unconfirmed for Pod snapshots; {fix}",
            f"GPU sharing is unconfirmed for Pod snapshots; {fix}",
        )
        yield Finding(c.path, "gpu-sharing", text, severity)
