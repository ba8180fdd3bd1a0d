"""``gpu-driver``: a GPU pod must land only where the NVIDIA driver is 570 or newer.

Source: docs/gke-facts.md#section-9 (Google's reference architecture for vLLM with Pod snapshots,
``troubleshooting/``, and the llm-d Pod snapshot guides): GPU checkpointing needs driver 570+
(its helper ``gvisor-cuda-cr`` is only installed there). A pod that selects only
``cloud.google.com/gke-accelerator`` can land on GKE's default driver branch (535 in 2026),
serves normally, and its first checkpoint fails minutes later with ``runsc error: exit status
128``. Accepted as pinning the latest branch, any one of:

1. nodeSelector or required affinity ``cloud.google.com/gke-gpu-driver-version: latest``;
2. a pinned ComputeClass whose GPU priorities all say ``gpu.driverVersion: latest`` (cluster
   cache, or the ComputeClasses in ``snapready check``'s input);
3. cluster mode: every known node pool with GPUs the pod can land on (``landing_pools``) is
   labelled ``latest``.

Default ``warn`` (``rules.gpu_driver.severity``; deny configurable): node pools may all run the
latest branch without the pod saying so. Fix: add the nodeSelector (``rules.gpu_driver.pin``
makes the mutating webhook add it). Relaxed for ``rootfs-only`` policies (no GPU memory is
checkpointed). Pure module.
"""

from __future__ import annotations

from collections.abc import Iterator

from webhook.base.text import clip
from webhook.base.types import Finding
from webhook.kube.gke import COMPUTE_CLASS, GPU_DRIVER_VERSION, LATEST_DRIVER, NODE_POOL
from webhook.pod.context import PodContext
from webhook.pod.pools import landing_pools
from webhook.rules.constraints import fit
from webhook.rules.placement import Placement

_WHY = "GKE's default driver branch cannot checkpoint (first checkpoint: exit status 128)"
_FIX = f"add nodeSelector {GPU_DRIVER_VERSION}: {LATEST_DRIVER}"


def _class_latest(ctx: PodContext, place: Placement) -> bool:
    """A pinned ComputeClass (all of them, when several are allowed) whose GPU priorities all
    install the latest driver branch."""
    pin = place.pins.get(COMPUTE_CLASS)
    classes = ctx.cluster.compute_classes
    if pin is None or not pin.exhaustive or not pin.values or classes is None:
        return False
    facts = [classes.get(name) for name in pin.values]
    return all(f is not None and f.gpu_drivers == {LATEST_DRIVER} for f in facts)


def _pools_latest(ctx: PodContext, place: Placement) -> bool:
    """Cluster mode: every known GPU node pool the pod can land on is labelled ``latest``
    (False without pools: nothing is known)."""
    pools = [
        facts
        for facts in landing_pools(place.selection, ctx.cluster.node_pools)
        if facts.accelerators
    ]
    pin = place.pins.get(NODE_POOL)
    if pin is not None and pin.exhaustive:
        pools = [facts for facts in pools if facts.name in pin.values]
    return bool(pools) and all(facts.gpu_drivers == {LATEST_DRIVER} for facts in pools)


def driver_findings(ctx: PodContext, place: Placement) -> Iterator[Finding]:
    """``gpu-driver`` for a GPU pod (``place.gpus.total > 0``, whole-pod policies): one finding
    at the driver pin that allows another branch, else at the first GPU limit."""
    severity = ctx.settings.rules.gpu_driver.severity
    pin = place.pins.get(GPU_DRIVER_VERSION)
    if pin is not None and pin.exhaustive:
        others = sorted(pin.values - {LATEST_DRIVER})
        if not others:
            return
        path = pin.path_of(others[0])
        text = fit(
            "gpu-driver",
            path,
            f"driver branch {clip(others[0])} is older than 570: {_WHY}; use {LATEST_DRIVER}",
            f"driver branch {clip(others[0])} cannot checkpoint GPUs; use {LATEST_DRIVER}",
        )
        yield Finding(path, "gpu-driver", text, severity)
        return
    if _class_latest(ctx, place) or _pools_latest(ctx, place):
        return
    path = place.gpus.containers[0].path
    text = fit(
        "gpu-driver",
        path,
        f"may land on the default GPU driver branch (535); {_WHY}; {_FIX}",
        f"may land on the default GPU driver (535, cannot checkpoint); {_FIX}",
        _FIX,
    )
    yield Finding(path, "gpu-driver", text, severity)
