"""Will this pod restore from a snapshot? The prediction made at admission, and why not.

GKE restores a new pod from a Ready PodSnapshot of its policy (and snapshot group) only when the
pod's distilled spec hashes the same as the snapshot's, it lands on the same machine series and
CPU architecture, and its node runs the same gVisor kernel and GPU driver, i.e. the same GKE node
version and driver branch (docs/gke-facts.md#section-3). Otherwise it cold-starts silently.
``predict`` checks those conditions against the origin records (``snapshots.views``) from memory:

1. candidates: the Ready snapshots of the selecting policies in the pod's namespace whose
   recorded group (the origin pod's values of ``snapshotGroupingRules.groupByLabelValue.labels``)
   equals the pod's, newest first; or only the one named by ``podsnapshot.gke.io/ps-name``;
2. a candidate matches when the fingerprints are equal (skipped for ``rootfs-only`` policies),
   the pod can land on the origin's machine family and arch (its pins, its ComputeClass, or the
   node pools it can land on: ``pools.machine_reasons``), and some node pool the pod can land
   on runs the origin's node version and GPU driver label (pools unknown: not checked);
3. ``hit`` names the first (newest) match; ``miss`` the closest candidate and every
   difference; ``none`` means no ready snapshot with a known origin exists yet;
4. that first match is still a ``miss`` (``Prediction.refusal``) when gVisor itself would
   refuse the restore (GKE's choice among several matches is not documented: like the ``hit``,
   the prediction takes the newest): a run-to-completion init container of the pod, or of the
   snapshot's origin pod, mounts an emptyDir first (``pod.emptydirs``; not for ``rootfs-only``
   policies, nor with rule ``init-emptydir`` disabled). Such a restore crash-loops, with no
   cold-start fallback (docs/gke-facts.md#section-9).
Our fingerprint is our own, not GKE's hash: a prediction is a strong hint, not a promise.
Pure module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from webhook.base.text import clip
from webhook.kube.gke import PS_NAME
from webhook.kube.matching import Policy
from webhook.pod.emptydirs import Refusal, refusal
from webhook.pod.fields import differing_fields
from webhook.pod.node_pins import NodeSelection
from webhook.pod.pools import MachineFit, landing_pools, machine_fit, machine_reasons, pools_text
from webhook.pod.tolerations import Toleration
from webhook.snapshots.index import (
    OriginKey,
    ReadyGroups,
    SnapshotIndex,
    distinct_origins,
    group_key,
)
from webhook.snapshots.state import ComputeClassFacts, NodePoolFacts
from webhook.snapshots.views import OriginRecord, SnapshotView

Outcome = Literal["hit", "miss", "none"]
Origin = tuple[OriginKey, SnapshotView]
"""A distinct origin to compare, with its newest snapshot."""
PREDICTION_KEY = "prediction"
"""Key of the ``Prediction`` the mutating webhook made for a pod in ``PodContext.memo``
(``mutation.prediction.stamp_prediction`` writes it; the prediction rules read it)."""
MAX_FIELDS_NAMED = 3
"""Differing fields named in a reason before ``+N more`` (warnings are cut at 256 characters)."""


@dataclass(frozen=True)
class Prediction:
    """The answer for one pod.

    Attributes:
        outcome: ``hit``, ``miss`` or ``none``.
        snapshot: the snapshot a hit restores from, or the closest one for a miss; None else.
        reason: one line naming what differs (miss), what matched (hit) or why none.
        fields: the differing field paths of ``snapshot`` (miss), all of them.
        candidates: how many ready candidates were compared.
        refusal: for a ``miss`` whose snapshot matches but whose restore gVisor refuses
            (``pod.emptydirs.refusal``), why; the pod would crash-loop, not cold-start.
    """

    outcome: Outcome
    snapshot: str | None
    reason: str
    fields: tuple[str, ...] = ()
    candidates: int = 0
    refusal: Refusal | None = None


@dataclass
class PodFacts:
    """What the prediction reads of the pod (final, after injection).

    Attributes:
        namespace: the pod's namespace; ``labels``/``annotations``: its metadata.
        policies: the selecting policies; ``spec_hash``: its fingerprint.
        fields: its field digests, or a function computing them: only a fingerprint mismatch
            needs them, so the common case (hit, none) never distills the pod a second time.
        selection: its node pins (``pod.node_pins.node_selection``), or a function computing
            them: only a pod with Ready recorded snapshots to compare needs them.
        blocker: why gVisor would refuse to restore the pod from any snapshot
            (``pod.emptydirs.restore_blocker``), or a function computing it: only a match
            needs it. None: nothing known stops a restore.
        gpus: whether it asks for ``nvidia.com/gpu`` (``pod.resources.requests_gpus``), or a
            function computing it (only a comparison needs it).
        tolerations: its ``spec.tolerations`` (``pod.tolerations.tolerations_of``), or a
            function computing them; None: not known (node pools' taints are not judged).
    """

    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    policies: tuple[Policy, ...]
    spec_hash: str
    fields: Mapping[str, str] | Callable[[], Mapping[str, str]]
    selection: NodeSelection | Callable[[], NodeSelection]
    blocker: str | Callable[[], str | None] | None = None
    gpus: bool | Callable[[], bool] = False
    tolerations: tuple[Toleration, ...] | Callable[[], tuple[Toleration, ...]] | None = None

    def pod_tolerations(self) -> tuple[Toleration, ...] | None:
        """The tolerations (computed once, on first use); None: not known."""
        if callable(self.tolerations):
            self.tolerations = self.tolerations()
        return self.tolerations

    def landing(self, pools: Mapping[str, NodePoolFacts]) -> list[NodePoolFacts]:
        """The node pools of ``pools`` the pod can land on (``pools.landing_pools`` with its
        pins, GPU request and tolerations)."""
        return landing_pools(
            self.node_selection(), pools, gpu=self.uses_gpus(), tolerations=self.pod_tolerations()
        )

    def uses_gpus(self) -> bool:
        """Whether the pod asks for ``nvidia.com/gpu`` (computed once, on first use): it lands
        only on node pools with GPUs (``pools.landing_pools``)."""
        if callable(self.gpus):
            self.gpus = self.gpus()
        return self.gpus

    def restore_blocker(self) -> str | None:
        """The blocker (computed once, on first use)."""
        if callable(self.blocker):
            self.blocker = self.blocker()
        return self.blocker

    def field_digests(self) -> Mapping[str, str]:
        """The digests (computed once, on first use)."""
        if callable(self.fields):
            self.fields = self.fields()
        return self.fields

    def node_selection(self) -> NodeSelection:
        """The node pins (computed once, on first use)."""
        if callable(self.selection):
            self.selection = self.selection()
        return self.selection


def group_of(policy: Policy, labels: Mapping[str, str]) -> dict[str, str]:
    """The pod's snapshot group under ``policy``: its values of the grouping labels."""
    return {key: labels[key] for key in policy.grouping_labels if key in labels}


def _group_reads(
    pod: PodFacts, index: SnapshotIndex
) -> tuple[list[tuple[dict[str, str], ReadyGroups]], str]:
    """Per selecting policy: the pod's group and the policy's Ready snapshots by group (indexed
    at cache-update time: admission reads the pod's own group, never the namespace's); and the
    reason to give when the pod's groups hold none."""
    reads = []
    groups: list[str] = []
    any_ready = False
    for policy in pod.policies:
        wanted = group_of(policy, pod.labels)
        if policy.grouping_labels:
            shown = ",".join(f"{k}={wanted.get(k, '<none>')}" for k in policy.grouping_labels)
            groups.append(f"{policy.name} group {shown}")
        ready = index.ready_of(pod.namespace, policy.name)
        any_ready = any_ready or ready.ready > 0
        reads.append((wanted, ready))
    if any_ready and groups:
        return reads, f"no Ready snapshot in {'; '.join(groups)} yet (first start checkpoints)"
    names = ", ".join(sorted(p.name for p in pod.policies))
    return reads, f"no Ready snapshot of {names} yet (first start checkpoints)"


def candidates(pod: PodFacts, index: SnapshotIndex) -> tuple[list[SnapshotView], str]:
    """Ready snapshots the pod could restore from (newest first), and why there are none.

    A ``ps-name`` pin names the only candidate; it must be Ready and belong to a selecting
    policy (GKE restores only within the pod's policy). Otherwise the candidates are the Ready
    snapshots of the selecting policies whose recorded group equals the pod's (a snapshot not
    recorded yet is kept: its group is unknown).
    """
    pinned = pod.annotations.get(PS_NAME)
    names = {p.name for p in pod.policies}
    if pinned:
        view = index.named(pod.namespace, pinned)
        if view is None or not view.ready:
            state = "does not exist" if view is None else "is not Ready"
            return [], f"pinned snapshot {clip(pinned, 63)} ({PS_NAME}) {state}"
        if view.policy not in names:
            return [], (
                f"pinned snapshot {clip(pinned, 63)} belongs to policy {clip(view.policy, 63)}, "
                f"not to {', '.join(sorted(names))}"
            )
        return [view], ""
    reads, why_none = _group_reads(pod, index)
    found = [view for wanted, ready in reads for view in ready.candidates(wanted)]
    if len(reads) > 1:
        found.sort(key=lambda v: (v.created, v.name), reverse=True)
    if not found:
        return [], why_none
    return found, ""


def differences(
    pod: PodFacts,
    origin: OriginRecord,
    pools: list[NodePoolFacts],
    rootfs_only: bool,
    by_hash: dict[str, list[str]] | None = None,
    *,
    fit: MachineFit | None = None,
) -> tuple[list[str], list[str]]:
    """(differing field paths, every reason) between the pod and one origin record, given the
    node pools it can land on (``pools``) and where it can land (``fit``, ``pools.machine_fit``
    once per prediction; None: from its pins and ``pools`` alone, no ComputeClass known).

    ``by_hash``: the differing paths already computed in this prediction, by the origin's
    fingerprint (origins of one template on several node pools share them; filled here).
    """
    reasons: list[str] = []
    fields: list[str] = []
    if not rootfs_only and origin.spec_hash != pod.spec_hash:
        known = by_hash.get(origin.spec_hash) if by_hash is not None and origin.spec_hash else None
        if known is not None:
            fields = known
        else:
            fields = differing_fields(pod.field_digests(), origin.fields) if origin.fields else []
            if by_hash is not None and origin.spec_hash:
                by_hash[origin.spec_hash] = fields
        reasons.append(_fields_reason(fields) if fields else "the spec fingerprint differs")
    node = origin.node
    if fit is None:
        fit = machine_fit(pod.node_selection(), pools, None)
    reasons += machine_reasons(fit, node)
    version, driver = node.get("version"), node.get("gpuDriver")
    with_nodes = [p for p in pools if p.versions]
    if version and with_nodes and not any(version in p.versions for p in with_nodes):
        reasons.append(f"{pools_text(with_nodes, 'versions')}, snapshot taken on {version}")
    drivers = [p for p in pools if p.gpu_drivers]
    if driver and drivers and not any(driver in p.gpu_drivers for p in drivers):
        reasons.append(f"GPU driver {pools_text(drivers, 'gpu_drivers')}, snapshot on {driver}")
    return fields, reasons


def _fields_reason(fields: list[str]) -> str:
    shown = ", ".join(fields[:MAX_FIELDS_NAMED])
    more = f" +{len(fields) - MAX_FIELDS_NAMED} more" if len(fields) > MAX_FIELDS_NAMED else ""
    return f"{shown}{more} differ{'s' if len(fields) == 1 else ''}"


def comparisons(pod: PodFacts, index: SnapshotIndex) -> tuple[int, int, list[Origin], str]:
    """What ``predict`` compares, from the index alone (no walk over the namespace).

    Returns:
        (candidates: Ready snapshots of the pod's group(s), unrecorded ones included;
        comparable: those whose record knows the origin's fingerprint; the distinct origins to
        compare, each with its newest snapshot, newest first; why there are no candidates).
    """
    if pod.annotations.get(PS_NAME):
        found, why_none = candidates(pod, index)
        comparable = sum(1 for v in found if v.origin is not None and v.origin.spec_hash)
        return len(found), comparable, list(distinct_origins(found)), why_none
    reads, why_none = _group_reads(pod, index)
    count = comparable = 0
    classes: list[Origin] = []
    for wanted, ready in reads:
        key = group_key(wanted)
        count += len(ready.by_group.get(key, ())) + len(ready.unrecorded)
        comparable += ready.comparable.get(key, 0)
        classes += ready.origins.get(key, ())
    if not count:
        return 0, 0, [], why_none
    if len(reads) > 1:  # several policies: one newest-first list, each origin once
        classes.sort(key=lambda item: (item[1].created, item[1].name), reverse=True)
        first: dict[OriginKey, SnapshotView] = {}
        for origin, view in classes:
            first.setdefault(origin, view)
        classes = list(first.items())
    return count, comparable, classes, ""


def _matched(pod: PodFacts, view: SnapshotView, comparable: int, blockers: bool) -> Prediction:
    """A ``hit`` on ``view``, or the ``miss`` of a match gVisor cannot restore from (not for a
    snapshot of a ``rootfs-only`` policy, when another policy selects the pod too)."""
    found = None
    memory = all(p.scope != "rootfs-only" for p in pod.policies if p.name == view.policy)
    if blockers and memory:
        origin = view.origin.blocker if view.origin is not None else None
        found = refusal(pod.restore_blocker(), origin, view.name)
    if found is None:
        return Prediction("hit", view.name, "matches snapshot " + view.name, (), comparable)
    return Prediction("miss", view.name, found.reason, (), comparable, refusal=found)


def predict(
    pod: PodFacts,
    index: SnapshotIndex,
    pools: Mapping[str, NodePoolFacts],
    *,
    rootfs_only: bool,
    blockers: bool = True,
    compute_classes: Mapping[str, ComputeClassFacts] | None = None,
) -> Prediction:
    """The prediction for ``pod`` from the snapshot index and node-pool facts (no I/O).
    ``blockers``: whether gVisor's refusals count (``pod.emptydirs``; callers pass False when
    rule ``init-emptydir`` is disabled: a team that knows GKE restores such pods).
    ``compute_classes``: ``ClusterState.compute_classes`` (a pod pinned to a ComputeClass
    lands on the machine families it makes; None: not known).

    Reads only the pod's group(s) of the index (``comparisons``), and compares each distinct
    origin once: snapshots of one template on one pool share their record's fingerprint and
    node facts, so 21 snapshots of a group cost one comparison, not 21.
    """
    found, comparable, classes, why_none = comparisons(pod, index)
    if not found:
        return Prediction("none", None, why_none)
    # A record whose origin pod was never known (``specHash`` null) cannot be compared: it is
    # treated like a snapshot without a record, never as a difference.
    if not comparable:
        why = f"{found} Ready snapshot(s) have no known origin yet"
        return Prediction("none", None, why, (), 0)
    landing = pod.landing(pools)
    fit = machine_fit(pod.node_selection(), landing, compute_classes, pools, gpu=pod.uses_gpus())
    # Only an origin with the pod's fingerprint can be a hit (a different one is always a
    # reason), and comparing it never needs the pod's field digests: those origins go first, so
    # a hit behind a newer origin of another fingerprint does not compute the digests (~30 us
    # on review 03's pod, ``make bench-admit``) only to name fields no one reads.
    compared: dict[int, tuple[list[str], list[str]]] = {}
    for number, (_, view) in enumerate(classes):
        assert view.origin is not None
        if rootfs_only or view.origin.spec_hash == pod.spec_hash:
            fields, reasons = compared[number] = differences(
                pod, view.origin, landing, rootfs_only, fit=fit
            )
            if not reasons:
                return _matched(pod, view, comparable, blockers and not rootfs_only)
    best: tuple[int, SnapshotView, list[str], list[str]] | None = None
    by_hash: dict[str, list[str]] = {}
    for number, (_, view) in enumerate(classes):
        assert view.origin is not None
        known = compared.get(number)
        if known is None:
            known = differences(pod, view.origin, landing, rootfs_only, by_hash, fit=fit)
        fields, reasons = known
        score = len(reasons) * 1000 + len(fields)
        if best is None or score < best[0]:
            best = (score, view, fields, reasons)
    assert best is not None
    _, view, fields, reasons = best
    return Prediction("miss", view.name, "; ".join(reasons), tuple(fields), comparable)
