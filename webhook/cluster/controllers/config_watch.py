"""The metadata-only watch of Secrets and ConfigMaps, only in namespaces with snapshots (rule
``stale-config``).

A snapshot restores the values its origin pod read (docs/gke-facts.md#section-3: GKE hashes no env
and no Secret content), so a rotated Secret goes unnoticed. ``ConfigWatch`` keeps, per namespace
that has a snapshot whose origin record names consumed configuration (``snapshots.config_refs``),
two reflectors: ``/api/v1/namespaces/<ns>/secrets`` and ``.../configmaps``, listed and watched as
``PartialObjectMetadata`` (``KubeTransport.metadata_only``: the API server sends metadata only,
never ``data``), each object kept as a resourceVersion and a time (``ConfigMeta``). Namespaces
are added and dropped as snapshots come and go (woken by the snapshot cache). Every replica runs
it (admission warns about ``stale-config`` snapshots); it never writes.

Cost: two watches per such namespace, a few dozen bytes per object there; none at all in a
cluster without snapshots that read configuration. These reflectors never gate readiness: until
a namespace has listed, its snapshots are simply not judged ``stale-config``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from webhook.cluster.api import watched
from webhook.cluster.api.reflector import Reflector
from webhook.cluster.api.syncing import Resource, Timing, Transport
from webhook.cluster.controllers.base import Reconciler
from webhook.snapshots.config_refs import ConfigIndex, ConfigMeta, config_meta, watched_namespaces
from webhook.snapshots.state import ClusterState

log = logging.getLogger("snapready.kube")
KINDS = watched.CONFIGS
RECHECK = 60.0
"""Seconds between looks at the namespaces when no snapshot change wakes the watch."""


def _resource(namespace: str, kind: str, collection: watched.Collection) -> Resource:
    return Resource(
        f"{collection.name}/{namespace}",
        collection.paths(namespace),
        convert=config_meta,
        build=lambda items: {(kind, key.rpartition("/")[2]): meta for key, meta in items.items()},
    )


class ConfigWatch(Reconciler):
    """Starts and stops the per-namespace metadata reflectors; ``view()`` is their index.

    Args:
        transport: a metadata-only transport (``KubeTransport.metadata_only``).
        state: the current cluster state (its snapshots decide the namespaces).
        timing: the caches' timing; ``lock``/``on_change``: the source's.
        mine: whether a namespace is watched at all (``outcomes.namespaces``).
    """

    first_delay = 0.0  # namespaces of the snapshots already listed, at once

    def __init__(
        self,
        transport: Transport,
        *,
        state: Callable[[], ClusterState],
        timing: Timing,
        lock: threading.Lock,
        on_change: Callable[[], None],
        mine: Callable[[str], bool] = lambda _namespace: True,
    ) -> None:
        super().__init__("configWatch", lock, on_change, period=RECHECK)
        self.transport, self.state, self.timing, self.mine = transport, state, timing, mine
        self.children: dict[str, tuple[Reflector, ...]] = {}
        self._seen: tuple[Any, ...] = ()
        self._view: ConfigIndex = {}

    def stop(self) -> None:
        """Stop this loop and every namespace's reflectors."""
        super().stop()
        for reflectors in list(self.children.values()):
            for reflector in reflectors:
                reflector.stop()

    def reconcile(self) -> None:
        """Start reflectors for new namespaces, stop those of namespaces without snapshots;
        woken when snapshots change (``notify``) and every ``RECHECK`` seconds."""
        state = self.state()
        if not state.snapshots_known:
            return
        wanted = {
            ns for ns in watched_namespaces(state.snapshots.by_name.values()) if self.mine(ns)
        }
        for namespace in sorted(wanted - self.children.keys()):
            reflectors = tuple(
                Reflector(
                    _resource(namespace, kind, collection),
                    self.transport,
                    self.timing,
                    self.lock,
                    self.on_change,
                )
                for kind, collection in KINDS
            )
            self.children[namespace] = reflectors
            for reflector in reflectors:
                reflector.start()
            log.info("watching Secret and ConfigMap metadata in namespace %s", namespace)
        gone = sorted(self.children.keys() - wanted)
        for namespace in gone:
            for reflector in self.children.pop(namespace):
                reflector.stop()
            log.info("stopped watching Secret and ConfigMap metadata in namespace %s", namespace)
        status = f"{len(self.children)} namespaces"
        if gone or status != self.status:
            self.set_status(status)  # publishes a state without the dropped namespaces

    def view(self) -> ConfigIndex:
        """namespace -> (kind, name) -> ``ConfigMeta`` of every namespace whose two lists are
        done (a namespace still listing is absent: not judged). Rebuilt only on a change."""
        children = dict(self.children)
        seen = tuple(
            item
            for ns, rs in children.items()
            for item in (ns, *(r.view for r in rs), *(r.synced and r.served for r in rs))
        )
        if not _same(seen, self._seen):
            index: dict[str, Mapping[tuple[str, str], ConfigMeta]] = {}
            for namespace, reflectors in children.items():
                if all(r.synced and r.served for r in reflectors):
                    merged: dict[tuple[str, str], ConfigMeta] = {}
                    for reflector in reflectors:
                        merged.update(reflector.view)
                    index[namespace] = merged
            self._seen, self._view = seen, index
        return self._view


def _same(new: tuple[Any, ...], old: tuple[Any, ...]) -> bool:
    """Element-wise identity (the reflectors' views are replaced, never edited, on a change)."""
    return len(new) == len(old) and all(a is b for a, b in zip(new, old, strict=True))
