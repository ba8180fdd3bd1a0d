"""Which (namespace, policy, group, fingerprint) the live pods and the snapshots use: the
keys that ``snapshots.prune`` and ``snapshots.refresh`` compare. Pure module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.kube.matching import Policy
from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import Group, SnapshotView, UseKey

LISTED_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")
"""Workload kinds whose templates the leader lists on demand
(``cluster.controllers.snapshot_lifecycle``); a snapshot whose origin workload is of another
kind is never ``unused`` (its templates are unknown)."""
ENDED_PHASES = ("Succeeded", "Failed")


def group_of(policy: Policy, labels: Mapping[str, str]) -> Group:
    """The group of a pod or template with ``labels`` under ``policy`` (its grouping labels'
    values; a missing label is absent), as ``pod.restore.group_of`` records it."""
    return tuple(sorted((k, labels[k]) for k in policy.grouping_labels if k in labels))


def use_keys(
    namespace: str, labels: Mapping[str, str], spec_hash: str, policies: Iterable[Policy]
) -> list[UseKey]:
    """The keys a pod or template with ``labels`` and fingerprint ``spec_hash`` uses under
    the ``policies`` that select it (callers pass ``PolicyIndex.select``'s answer)."""
    return [(namespace, p.name, group_of(p, labels), spec_hash) for p in policies]


UseCache = dict[str, tuple[object, object, tuple[UseKey, ...]]]
"""pod key -> (its record, the policy index, its use keys): ``pod_uses`` of the last pass."""


def pod_uses(state: ClusterState, cache: UseCache | None = None) -> frozenset[UseKey]:
    """Use keys of the live stamped pods (not ``Succeeded``/``Failed``), each under the live
    policies that select it by its labels (never the pod's own ``<prefix>policy``).

    ``cache`` (the leader's, across passes): a pod whose record and the policy index are the
    same objects as last time reuses its keys (records and the index are replaced, never
    edited, on a change), so a pass over 20,000 unchanged pods selects none of them again."""
    keys: set[UseKey] = set()
    policies = state.policies
    for key, record in tuple(state.pods.items()):  # the live dict: a copy (ClusterState.pods)
        if record.spec_hash is None or record.phase in ENDED_PHASES:
            continue
        hit = cache.get(key) if cache is not None else None
        if hit is not None and hit[0] is record and hit[1] is policies:
            keys.update(hit[2])
            continue
        selecting = policies.select(record.namespace, record.labels)
        found = tuple(use_keys(record.namespace, record.labels, record.spec_hash, selecting))
        if cache is not None:
            cache[key] = (record, policies, found)
        keys.update(found)
    if cache is not None and len(cache) > len(state.pods):
        for key in [k for k in cache if k not in state.pods]:
            del cache[key]
    return frozenset(keys)


def snapshot_use(view: SnapshotView) -> UseKey | None:
    """The use key of a snapshot from its origin record; None when its fingerprint is unknown
    (``SnapshotView.use_key``, computed once per view)."""
    return view.use_key
