"""``rules.gpu_driver.pin``: pin a selected GPU pod to GKE's latest GPU driver branch.

GPU checkpointing needs NVIDIA driver 570+; GKE's default branch (535 in 2026) fails the first
checkpoint with ``runsc error: exit status 128`` (docs/gke-facts.md#section-9; the ``gpu-driver``
rule). With the setting on (off by default: it narrows where the pod may schedule), a selected pod
that uses GPUs (``nvidia.com/gpu`` or a MIG profile) and whose node selection does not mention
``cloud.google.com/gke-gpu-driver-version`` gets nodeSelector
``cloud.google.com/gke-gpu-driver-version: latest``. Pods pinned to a ComputeClass are left
alone (the class decides the driver: ``driverVersion`` in its GPU priorities). The nodeSelector
is not a fingerprinted field, so the spec-hash is unchanged.
"""

from __future__ import annotations

from webhook.kube.gke import (
    COMPUTE_CLASS,
    GPU_DRIVER_VERSION,
    GPU_RESOURCE,
    LATEST_DRIVER,
    MIG_RESOURCE_PREFIX,
)
from webhook.mutation.patch import Draft
from webhook.pod.context import PodContext
from webhook.pod.node_pins import node_selection
from webhook.pod.resources import prefixed_resources, resource_usages


def pin_gpu_driver(draft: Draft, ctx: PodContext) -> bool:
    """Add the latest-driver nodeSelector when ``rules.gpu_driver.pin`` is on (see module)."""
    if not ctx.settings.rules.gpu_driver.pin or ctx.rootfs_only:
        return False
    resources = (GPU_RESOURCE, *prefixed_resources(ctx.spec, MIG_RESOURCE_PREFIX))
    if not any(u.total for u in resource_usages(ctx.spec, ctx.spec_path, resources)):
        return False
    pins = node_selection(ctx.spec, ctx.spec_path).pins
    driver, klass = pins.get(GPU_DRIVER_VERSION), pins.get(COMPUTE_CLASS)
    if (driver is not None and driver.mentioned) or (klass is not None and klass.mentioned):
        return False
    return draft.put(("spec", "nodeSelector"), GPU_DRIVER_VERSION, LATEST_DRIVER)
