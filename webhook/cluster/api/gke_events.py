"""The cache of GKE's own restore evidence: core/v1 Events of reason ``GKEPodSnapshotting``
(docs/gke-facts.md#section-9), bounded against tenants who write Events with that reason.

Only Events of that reason are listed and watched (a field selector, never all Events of the
cluster), each kept as a few strings (``snapshots.evidence.gke_event``).
"""

from __future__ import annotations

from collections.abc import Callable

from webhook.cluster.api import watched
from webhook.cluster.api.syncing import Resource
from webhook.snapshots.evidence import GkeEvent, gke_event, index_events, updated_events

MAX_GKE_EVENTS = 2_000
"""``GKEPodSnapshotting`` Events kept at most per namespace (~1.5 KiB each: 3 MiB). Anyone
allowed to create Events in a namespace (the built-in ``edit`` role) can create them with that
reason, and every replica would keep each one (a hostile trial measured ~100-180k within the
Events' 1 h life past the chart's 256 MiB memory limit); a bound over all namespaces let one
namespace crowd out every other's (a review). GKE writes about one per restore, fallback or
checkpoint of a pod; past the bound a namespace's new Events are not kept (logged once,
``/readyz`` says so): its outcomes then wait for ``PodRestored`` or the settle time instead."""
MAX_GKE_EVENTS_TOTAL = 20_000
"""And at most over all namespaces (~30 MiB): Events floods in many namespaces (a cluster-wide
``edit`` binding, or many tenants) cannot outgrow the memory limit either (a review); past it
no namespace's new Events are kept."""
MAX_EVENTS_PER_STAMPED_POD = 8
"""GKE Events about a pod snapready stamped (in the pod cache) kept whatever the two bounds
above say (``Resource.owner``): GKE writes one to three per pod (a restore or fallback, a
checkpoint or two), so Events flooding other namespaces cannot push them out (a trial: ten
untracked namespaces at 2,000 each filled the ceiling, and a stamped pod's fallback waited for
the settle time); a flood naming the pod itself is held to this many."""


def gke_events_resource(
    stamped: Callable[[str], str | None] | None, pods_listed: Callable[[], bool] | None
) -> Resource:
    """The GKE Events ``Resource``: bounded per namespace and in all, an Event about a stamped
    pod (``stamped(namespace/name)``: its uid in the pod cache, else None) kept first, the first
    list once ``pods_listed()`` (the pod cache has listed)."""
    return Resource(
        watched.GKE_EVENTS.name,
        watched.GKE_EVENTS.paths(),
        convert=gke_event,
        build=lambda items: index_events(items.values()),
        update=updated_events,
        max_per_namespace=MAX_GKE_EVENTS,
        max_items=MAX_GKE_EVENTS_TOTAL,
        owner=None if stamped is None else event_owner(stamped),
        max_per_owner=MAX_EVENTS_PER_STAMPED_POD,
        waits_for=pods_listed,
    )


def event_owner(stamped: Callable[[str], str | None]) -> Callable[[GkeEvent], str | None]:
    """``Resource.owner`` of GKE Events: ``namespace/name/uid`` of the stamped pod it is about
    (by uid: Events of an earlier pod of that name, a StatefulSet's, own nothing)."""

    def owner(event: GkeEvent) -> str | None:
        key = f"{event.namespace}/{event.pod}"
        uid = stamped(key)
        return f"{key}/{uid}" if uid and uid == event.uid else None

    return owner
