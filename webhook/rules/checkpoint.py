"""``checkpoint-window``: what breaks a checkpoint while it uploads, or a restore afterwards.

Sources (docs/gke-facts.md#section-9, field reports):

- The checkpoint window: during the upload (minutes: ~20 GiB in 4-5 min) the origin pod is
  paused; evicted or deleted before the upload ends (cluster autoscaler scale-down, active
  migration), the checkpoint fails. Google's reference architecture ships a PodDisruptionBudget
  with ``maxUnavailable: 0`` for the snapshot source. So a Deployment or StatefulSet selected by a
  whole-pod policy with a ``workload`` or ``manual`` trigger whose pods no PDB of the namespace
  holds at zero disruptions (``maxUnavailable: 0``/``"0%"``, ``minAvailable: "100%"``) is warned.
  Judged only where PDBs are known (``ClusterState.disruption_budgets``: cluster mode's PDB
  cache once listed, or the PDBs of ``snapready check``'s input); not judged in file mode.
- Writable state: GKE's docs warn, and databases under ``postCheckpoint: resume`` (the CRD's
  default) crashed on every restore (``OCI runtime restore failed: ... vfs.CompleteRestore()``,
  no cold-start fallback): the pod keeps writing its PVC after the checkpoint. A pod or template
  with ``persistentVolumeClaim``/``ephemeral`` volumes under such a policy is warned.

Both are warnings (advisory). Relaxed for ``rootfs-only`` policies (no memory restore). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from webhook.base.text import clip
from webhook.base.types import Finding
from webhook.kube.matching import Policy
from webhook.pod.context import PodContext
from webhook.rules.constraints import fit
from webhook.snapshots.state import DisruptionBudget

_TRIGGERS = ("workload", "manual")
_SOURCE_KINDS = ("Deployment", "StatefulSet")


def _whole_pod(ctx: PodContext) -> list[Policy]:
    return [p for p in ctx.policies if p.scope != "rootfs-only"]


def window_findings(ctx: PodContext) -> Iterator[Finding]:
    """A selected Deployment/StatefulSet without a zero-disruption PDB over its pods."""
    budgets = ctx.cluster.disruption_budgets
    if ctx.kind not in _SOURCE_KINDS or budgets is None:
        return
    if not any(p.trigger_type in _TRIGGERS for p in _whole_pod(ctx)):
        return
    labels = {k: v for k, v in ctx.labels.items() if isinstance(v, str)}
    held = [b for b in budgets.get(ctx.namespace, ()) if b.selector.matches(labels)]
    if any(b.zero for b in held):
        return
    fix = "an eviction during the checkpoint upload fails it; add a PDB with maxUnavailable: 0"
    lead = "no PodDisruptionBudget holds these pods at 0 disruptions"
    path = ctx.metadata_field("labels")
    if not held:
        text = f"{lead}: {fix} for them"
    else:
        said = _allows(held[0])
        text = fit(
            "checkpoint-window",
            path,
            f"{lead} at any count ({said}): {fix} for them",
            f"{lead} at any count ({said}): {fix}",
            f"no PDB holds these pods at 0 disruptions at any count ({said}): {fix}",
            f"no PDB holds them at 0 disruptions at any count: {fix}",
        )
    yield Finding(path, "checkpoint-window", text, "warn")


def _allows(budget: DisruptionBudget) -> str:
    """What a PDB that is not ``zero`` lets through, e.g. ``PDB llm-pdb: minAvailable: 1, so 0
    only up to 1 pod``: at one replica it holds, at two it does not."""
    name = clip(budget.name, 40)
    if budget.min_available is not None:
        return f"PDB {name}: {budget.budget}, so 0 only up to {budget.min_available} pod(s)"
    return f"PDB {name}: {budget.budget or 'no budget'}"


def resume_findings(ctx: PodContext) -> Iterator[Finding]:
    """``postCheckpoint: resume`` on a pod that writes a PVC (one finding, at the first)."""
    if not any(p.post_checkpoint == "resume" for p in _whole_pod(ctx)):
        return
    for index, volume in ctx.indexed("volumes"):
        if "persistentVolumeClaim" in volume or "ephemeral" in volume:
            text = (
                "postCheckpoint: resume with a PVC: files written after the checkpoint make "
                "restores crash (vfs.CompleteRestore, no cold start); use postCheckpoint: stop "
                "or keep that state off the PVC"
            )
            yield Finding(ctx.spec_field("volumes", index), "checkpoint-window", text, "warn")
            return


class CheckpointWindow:
    """The ``checkpoint-window`` findings of one pod view (see the module docstring)."""

    rule_ids: tuple[str, ...] = ("checkpoint-window",)

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """Both checks; none for ``rootfs-only`` pods."""
        if pod.rootfs_only:
            return ()
        return (*window_findings(pod), *resume_findings(pod))
