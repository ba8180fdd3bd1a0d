"""``shared-fingerprint`` (``snapready check`` only): different workloads that would restore from
each other's snapshots.

Source: docs/gke-facts.md#section-9 ("Grouping is isolation"): pods selected by one policy, in one
snapshot group (same values of the policy's ``snapshotGroupingRules`` labels), with equal
distilled specs restore from each other's snapshots. Two different workloads (production-stack's
prefill and decode Deployments differ only in env and labels; agent-sandbox users' sandboxes)
then restore each other's memory: for sandboxes one tenant's memory and files in another's pod.
``check`` sees every workload of its input at once, so it flags each object of such a set with a
warning naming the others. Fix: group the policy by a label whose value differs per workload
(``snapshotGroupingRules.groupByLabelValue.labels``), or give each workload its own policy.
Fingerprints are the webhook's (``as_admitted`` + ``fingerprint``, as ``snapready hash``).
GKE restores only onto the machine series and CPU architecture a snapshot was taken on
(docs/gke-facts.md#section-3): workloads whose exhaustive family (or instance-type) and
``kubernetes.io/arch`` pins have nothing in common never land where the other's snapshots
restore, so they are not flagged (an unpinned workload may land anywhere: it shares with all).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webhook.admission.decision import string_labels
from webhook.admission.engine import Engine
from webhook.base.text import clip, clip_all
from webhook.base.types import mapping
from webhook.kube.gke import ARCHITECTURE
from webhook.kube.manifests import LoadedObject
from webhook.kube.workloads import pod_views
from webhook.mutation import as_admitted
from webhook.pod.distill import fingerprint
from webhook.pod.node_pins import node_selection
from webhook.pod.pools import pinned_families
from webhook.pod.restore import group_of
from webhook.snapshots.views import workload_of

RULE = "shared-fingerprint"

Key = tuple[str, str, tuple[tuple[str, str], ...], str]
"""(namespace, policy, snapshot group values, fingerprint)."""
Machines = tuple[frozenset[str] | None, frozenset[str] | None]
"""The machine families and architectures a pod's exhaustive pins allow (None: any)."""


def _machines(spec: Any, spec_path: str) -> Machines:
    selection = node_selection(mapping(spec), spec_path)
    arch = selection.pins.get(ARCHITECTURE)
    return pinned_families(selection), arch.values if arch is not None and arch.exhaustive else None


def _meet(a: Machines, b: Machines) -> bool:
    """Whether some machine both allow (same family and architecture)."""
    return all(x is None or y is None or bool(x & y) for x, y in zip(a, b, strict=True))


def _keys(item: LoadedObject, engine: Engine, namespace: str) -> list[tuple[Key, str, Machines]]:
    """``(key, spec path, machines)`` of each selecting policy for the pod views of ``item``."""
    out: list[tuple[Key, str, Machines]] = []
    state = engine.state()
    for view in pod_views(item.obj):
        metadata = view.pod.get("metadata")
        labels = string_labels(metadata.get("labels") if isinstance(metadata, dict) else None)
        policies = state.policies.select(namespace, labels)
        if not policies:
            continue
        try:
            value = fingerprint(as_admitted(view.pod, engine.settings))
        except ValueError:
            continue  # the object's own result reports what is wrong with it
        machines = _machines(view.pod.get("spec"), view.spec_path)
        for policy in policies:
            if policy.scope == "rootfs-only":
                continue  # no memory is restored: nothing of another workload's state leaks
            group = tuple(sorted(group_of(policy, labels).items()))
            out.append(((namespace, policy.name, group, value), view.spec_path, machines))
    return out


def shared_fingerprints(
    objects: Sequence[LoadedObject], results: list[dict[str, Any]], engine: Engine, namespace: str
) -> None:
    """Add a ``shared-fingerprint`` warning to every result (same order as ``objects``) whose
    workload shares policy, group and fingerprint with another workload of the input; a result
    that was ``allow`` becomes ``warn``. Objects whose result is an ``error`` are left out."""
    members: dict[Key, dict[Machines, list[tuple[int, str, str]]]] = {}
    for index, (item, result) in enumerate(zip(objects, results, strict=True)):
        if result["decision"] == "error":
            continue
        ref = _workload(item)
        for key, path, machines in _keys(item, engine, item.namespace or namespace):
            members.setdefault(key, {}).setdefault(machines, []).append((index, ref, path))
    for key, by_machines in members.items():
        for machines, found in by_machines.items():  # few distinct pin sets: not quadratic
            meet = [g for other, g in by_machines.items() if _meet(machines, other)]
            _warn(results, key, found, sorted({ref for group in meet for _, ref, _ in group}))


def _warn(
    results: list[dict[str, Any]],
    key: Key,
    found: list[tuple[int, str, str]],
    refs: list[str],
) -> None:
    """The warning on each of ``found``, naming the other workloads of ``refs`` (sorted)."""
    if len(refs) < 2:
        return
    for index, ref, path in found:
        others = _others(refs, ref)
        where = "in one snapshot group of" if key[2] else "under ungrouped"
        message = (
            f"same fingerprint as {others} {where} policy {clip(key[1])}: they restore "
            "each other's snapshots (memory); group the policy by a label that differs per "
            "workload"
        )
        _add(results[index], path, message)


def _others(refs: list[str], ref: str, limit: int = 3) -> str:
    """``clip_all`` of the sorted ``refs`` other than ``ref``, in constant time per member: the
    set of one key can hold every object of the input (24,000 identical Deployments), so
    sorting it again for each member made ``check`` quadratic (87.7 s for 20 MB;
    docs/performance.md, bench-cli)."""
    shown = [r for r in refs[: limit + 1] if r != ref][:limit]
    hidden = len(refs) - 1 - len(shown)
    return clip_all(shown, limit=limit) + (f" +{hidden} more" if hidden > 0 else "")


def _workload(item: LoadedObject) -> str:
    """``Kind name`` of the workload ``item`` belongs to: a Pod's top controller when it has one
    (two replicas of one Deployment are one workload), else the object itself."""
    owner = workload_of(mapping(item.obj.get("metadata"))) if item.kind == "Pod" else None
    return owner.text() if owner is not None else f"{item.kind} {item.name or '?'}"


def _add(result: dict[str, Any], path: str, message: str) -> None:
    place = {key: result.get(key) for key in ("file", "document", "line")}
    result["findings"].append(
        {
            **place,
            "rule": RULE,
            "path": path,
            "message": message,
            "severity": "warn",
            "outcome": "warn",
        }
    )
    result["warnings"].append(f"[{RULE}] {path}: {message}")
    if result["decision"] == "allow":
        result["decision"] = "warn"
