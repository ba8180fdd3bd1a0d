"""``snapready status``: the pods and templates a policy selects that admission never judged.

Computed here, from the API server, with the leader's own functions (``snapshots.audit``,
``admission.audit.judge``), so the line agrees with the reports and the
``snapready_audit_*`` gauges whether or not reports are written: per policy, the running pods
it selects that snapready's mutating webhook never stamped (one list per policy with its
selector and ``<prefix>selected!=true``, plus stamped-looking pods without a fingerprint) and,
of those, the ones admission would deny now; the workload templates (Deployments,
StatefulSets, DaemonSets, Jobs not owned by a CronJob, CronJobs) last changed before every
policy that selects them existed. Judged in a cluster read for it: policies, node pools,
snapshots with their records (``Live``), the namespace's labels, its PodDisruptionBudgets, the
ComputeClasses and ``/version``; what cannot be read (a tenant may not get namespaces or list
ComputeClasses) is left unknown, with a note, as admission would treat an unknown.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from webhook.admission.audit import judge
from webhook.admission.engine import Engine
from webhook.base.text import clip
from webhook.base.types import RawObject, mapping
from webhook.cluster.api.snapshot_reader import READ_ERRORS, Live
from webhook.cluster.api.syncing import NotServed
from webhook.cluster.api.template_lists import TEMPLATE_LISTS
from webhook.cluster.api.watched import (
    COMPUTE_CLASSES,
    DISRUPTION_BUDGETS,
    NAMESPACES,
    VERSION_PATH,
)
from webhook.kube.matching import PolicyIndex
from webhook.snapshots.audit import (
    admitted,
    owned_by_controller,
    running,
    selector_query,
    with_query,
)
from webhook.snapshots.facts import compute_class_facts, gke_version, namespace_labels
from webhook.snapshots.state import ClusterState, disruption_budget

if TYPE_CHECKING:
    from webhook.base.config import Settings
    from webhook.cluster.api.transport import KubeTransport

Key = tuple[str, str]


def audit_state(
    transport: KubeTransport, live: Live, namespaces: Iterable[str], settings: Settings
) -> ClusterState:
    """The cluster admission would judge in, read for ``namespaces`` (notes in ``live``)."""
    page = settings.source.list_page_size
    labels: dict[str, dict[str, str]] = {}
    budgets: dict[str, tuple[Any, ...]] = {}
    for namespace in sorted(set(namespaces)):
        found = _get(transport, live, f"{NAMESPACES.path()}/{namespace}", "its labels")
        labels[namespace] = dict(namespace_labels(found, settings.prefix)) if found else {}
        items = _listed(transport, live, DISRUPTION_BUDGETS.path(namespace), page) or []
        budgets[namespace] = tuple(b for b in map(disruption_budget, items) if b is not None)
    classes = _listed(transport, live, COMPUTE_CLASSES.path(), page, True)
    found_version = _get(transport, live, VERSION_PATH, "the GKE version")
    facts = {f.name: f for f in map(compute_class_facts, classes or []) if f is not None}
    return ClusterState(
        policies=PolicyIndex.build(live.policies),
        namespace_labels=labels,
        node_pools=live.pools,
        nodes=live.nodes,
        compute_classes=facts if classes is not None else None,
        gke_version=gke_version(found_version) if found_version else None,
        synced=True,
        snapshots=live.index,
        snapshots_known=True,
        disruption_budgets=budgets,
        configs=live.configs,
    )


def _get(transport: KubeTransport, live: Live, path: str, what: str) -> RawObject | None:
    """One GET, or None with a note when the API server refuses it."""
    try:
        return transport.get(path)
    except READ_ERRORS as exc:
        live.notes.append(f"audit: cannot read {path} ({clip(str(exc), 120)}): {what} unknown")
        return None


def _listed(
    transport: KubeTransport, live: Live, path: str, page: int, quiet_404: bool = False
) -> list[RawObject] | None:
    """Every item of ``path``, or None with a note when the API server refuses the list
    (``quiet_404``: an API that is not served is no news, e.g. ComputeClasses off GKE)."""
    try:
        items, _ = transport.list(path, page_size=page)
    except NotServed as exc:
        if not quiet_404:
            live.notes.append(f"audit: {path} not found ({clip(str(exc), 120)}): left out")
        return None
    except READ_ERRORS as exc:
        live.notes.append(f"audit: cannot list {path} ({clip(str(exc), 120)}): left out")
        return None
    return items


def never_judged(
    transport: KubeTransport, live: Live, settings: Settings
) -> dict[Key, dict[str, Any]]:
    """Per ``(namespace, policy)`` of the live policies: ``{"pods": {"neverJudged": n,
    "wouldDeny": m}, "workloads": {...}}`` (module docstring)."""
    namespaces = {p.namespace for p in live.policies}
    if not namespaces:
        return {}
    state = audit_state(transport, live, namespaces, settings)
    engine = Engine(settings=settings, state=lambda: state)
    counts: dict[Key, dict[str, Any]] = {
        (p.namespace, p.name): {
            "pods": {"neverJudged": 0, "wouldDeny": 0},
            "workloads": {"neverJudged": 0, "wouldDeny": 0},
        }
        for p in live.policies
    }
    for obj, api_version, kind in _candidates(transport, live, settings):
        judgement = judge(obj, api_version, kind, engine)
        if judgement is None or judgement.admitted:
            continue
        block = "pods" if kind == "Pod" else "workloads"
        for policy in judgement.policies:
            entry = counts[(policy.namespace, policy.name)][block]
            entry["neverJudged"] += 1
            entry["wouldDeny"] += int(judgement.denied)
    return counts


def _candidates(
    transport: KubeTransport, live: Live, settings: Settings
) -> Iterable[tuple[RawObject, str, str]]:
    """Running pods a policy may select that were not stamped, then the workloads of the
    policies' namespaces; each once."""
    page, prefix = settings.source.list_page_size, settings.prefix
    seen: set[str] = set()
    unstamped = f"{prefix}selected!=true"
    for policy in sorted(live.policies, key=lambda p: (p.namespace, p.name)):
        query = selector_query(policy.selector, unstamped)
        path = with_query(f"/api/v1/namespaces/{policy.namespace}/pods", query)
        for pod in _listed(transport, live, path, page) or []:
            uid = str(mapping(pod.get("metadata")).get("uid") or "")
            if uid and uid not in seen and running(pod):
                seen.add(uid)
                yield pod, "v1", "Pod"
    namespaces = {p.namespace for p in live.policies}
    for pod in live.pods:  # labelled selected, but no fingerprint: never stamped either
        metadata = mapping(pod.get("metadata"))
        uid = str(metadata.get("uid") or "")
        if metadata.get("namespace") not in namespaces or uid in seen or not running(pod):
            continue
        if not admitted(metadata, prefix):
            seen.add(uid)
            yield pod, "v1", "Pod"
    for namespace in sorted(namespaces):
        for api_version, kind, resource in TEMPLATE_LISTS:
            path = f"/apis/{api_version}/namespaces/{namespace}/{resource}"
            for obj in _listed(transport, live, path, page) or []:
                if kind == "Job" and owned_by_controller(
                    mapping(obj.get("metadata")), ("CronJob",)
                ):
                    continue
                yield obj, api_version, kind


def audit_line(block: dict[str, Any] | None) -> list[str]:
    """The policy's ``audit`` line(s) for ``status`` text."""
    if block is None:
        return []
    pods, workloads = block["pods"], block["workloads"]
    if not pods["neverJudged"] and not workloads["neverJudged"]:
        return ["  audit      every running pod it selects was judged at admission"]
    count = pods["neverJudged"]
    verb = "was" if count == 1 else "were"
    lines = [
        f"  audit      {count} running pod{'' if count == 1 else 's'} {verb} never judged; "
        f"{pods['wouldDeny']} would be denied"
    ]
    if workloads["neverJudged"]:
        lines.append(
            f"             {workloads['neverJudged']} workload template(s) never judged (unchanged "
            f"since before the policy); {workloads['wouldDeny']} would be denied"
        )
    return lines


__all__ = ["audit_line", "audit_state", "never_judged"]
