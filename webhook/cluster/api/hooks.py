"""``CacheHooks``: who the caches (``caches.ClusterSource``) tell about changes, and the two
state inputs that are not caches. The manager (``cluster.manager``) fills one and hands it to
``ClusterSource.start``; the caches never know which controller listens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from webhook.snapshots.config_refs import ConfigIndex
from webhook.snapshots.pod_records import PodRecord


@dataclass(frozen=True)
class CacheHooks:
    """Who the caches tell about changes, and the two state inputs that are not caches.

    Every listener is called after the change is in the cache's store and the new state is
    published, and must not block (it sets a flag or queues: O(1)). Set once, at ``start``.

    Attributes:
        policies: the policy index changed (synced).
        snapshots: PodSnapshots, their records or node pools changed (a node-pool upgrade
            makes snapshots stale).
        evidence: GKE's snapshot Events or a stamped pod changed (restore outcomes).
        pods: every pod event's record once the pod cache holds it (changed or not).
        pods_gone: a stamped pod that left the pod cache (deleted, or its label removed).
        synced: every cache has listed after not having (lock held; the first sync, or after
            one was lost).
        configs: the Secret/ConfigMap metadata index (``ClusterState.configs``); None: empty.
        scope_in_sync: whether the webhook scope is in sync (``ClusterState.scope_synced``);
            None: not reconciled in this process.
    """

    policies: tuple[Callable[[], None], ...] = ()
    snapshots: tuple[Callable[[], None], ...] = ()
    evidence: tuple[Callable[[], None], ...] = ()
    pods: tuple[Callable[[PodRecord], None], ...] = ()
    pods_gone: tuple[Callable[[PodRecord], None], ...] = ()
    synced: tuple[Callable[[], None], ...] = ()
    configs: Callable[[], ConfigIndex] | None = None
    scope_in_sync: Callable[[], bool] | None = None
