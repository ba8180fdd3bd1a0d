"""A cache of objects anyone in a namespace may write (core Events) keeps a bounded number.

Anyone allowed to create Events in a namespace (the built-in ``edit`` role) can create them with
GKE's reason ``GKEPodSnapshotting``; every snapready replica keeps each one (a hostile trial
measured ~1.5 KiB each: 100-180k within the Events' 1 h life outgrow the chart's memory limit).
``Resource.max_per_namespace`` bounds the reflector on its list and its watch, per namespace (a
review: one bound over all let one namespace crowd out every other's Events); the GKE Events
cache uses it (``gke_events.MAX_GKE_EVENTS``). The reflector is driven here without a thread: a
list, then watch events, as its loop feeds them.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.envtest.plugin import wait_for
from webhook.cluster.api.caches import resources
from webhook.cluster.api.gke_events import (
    MAX_EVENTS_PER_STAMPED_POD,
    MAX_GKE_EVENTS,
    MAX_GKE_EVENTS_TOTAL,
)
from webhook.cluster.api.reflector import Reflector
from webhook.cluster.api.syncing import Timing, TransportError
from webhook.snapshots.evidence import GKE_EVENT_REASON


def event(name: str, pod: str, namespace: str = "ns") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
        "involvedObject": {"kind": "Pod", "namespace": namespace, "name": pod, "uid": "u-" + pod},
        "reason": GKE_EVENT_REASON,
        "type": "Warning",
        "message": "No compatible PodSnapshot, falling back to a cold start of pod",
        "eventTime": "2026-12-07T10:00:00.000000Z",
    }


class Listing:
    """A transport whose list returns ``objects`` (the reflector never watches here)."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    def list(
        self, path: str, *, page_size: int, each: Callable[[dict[str, Any]], None]
    ) -> tuple[list[dict[str, Any]], str]:
        for obj in self.objects:
            each(obj)
        return [], "10"


def reflector(
    objects: list[dict[str, Any]],
    limit: int,
    total: int | None = None,
    stamped: Callable[[str], str | None] | None = None,
) -> tuple[Reflector, list[int]]:
    (gke,) = (r for r in resources("snapready.io/", stamped=stamped) if r.name == "gkeevents")
    changes: list[int] = []
    bounded = Reflector(
        dataclasses.replace(gke, max_per_namespace=limit, max_items=total),
        Listing(objects),  # type: ignore[arg-type]
        Timing(),
        threading.Lock(),
        lambda: changes.append(1),
    )
    return bounded, changes


def test_the_gke_events_cache_is_bounded() -> None:
    (gke,) = (r for r in resources("snapready.io/") if r.name == "gkeevents")
    assert gke.max_per_namespace == MAX_GKE_EVENTS == 2_000
    assert gke.max_items == MAX_GKE_EVENTS_TOTAL == 20_000


def test_a_list_and_a_watch_keep_at_most_the_bound_and_say_so() -> None:
    cache, changes = reflector([event(f"e{n}", f"pod-{n}") for n in range(5)], limit=3)
    cache._list()
    assert len(cache.items) == 3 and cache.dropped == 2
    assert cache.status == "synced (some not kept since the last list: at most 3 per namespace)"
    assert len(cache.view) == 3

    published = len(changes)
    for n in range(5, 50):  # a flood past the bound changes nothing, publishes nothing
        cache._apply({"type": "ADDED", "object": event(f"e{n}", f"pod-{n}")})
    assert len(cache.items) == 3 and cache.dropped == 47
    assert len(changes) == published, "a dropped Event rebuilds no state"

    kept = next(iter(cache.items))
    cache._apply({"type": "DELETED", "object": event(kept.split("/", 1)[1], "gone")})
    cache._apply({"type": "ADDED", "object": event("late", "pod-late")})
    assert "ns/late" in cache.items and len(cache.items) == 3, "room again after a delete"
    cache._apply({"type": "MODIFIED", "object": event("late", "pod-late")})
    assert "ns/late" in cache.items, "a kept object's update is kept"


def test_under_the_bound_nothing_is_dropped() -> None:
    cache, _ = reflector([event(f"e{n}", f"pod-{n}") for n in range(3)], limit=3)
    cache._list()
    assert (len(cache.items), cache.dropped, cache.status) == (3, 0, "synced")


def test_one_namespace_flooding_never_crowds_out_another() -> None:
    """``aaa`` floods (and lists first: keys sort by namespace); GKE's own Events in ``llm``
    are kept, on the list and on the watch."""
    flood = [event(f"f{n}", f"p{n}", "aaa") for n in range(10)]
    cache, _ = reflector([*flood, event("gke-1", "server-1", "llm")], limit=3)
    cache._list()
    assert "llm/gke-1" in cache.items
    assert sum(key.startswith("aaa/") for key in cache.items) == 3
    for n in range(10, 20):
        cache._apply({"type": "ADDED", "object": event(f"f{n}", f"p{n}", "aaa")})
    cache._apply({"type": "ADDED", "object": event("gke-2", "server-2", "llm")})
    assert {"llm/gke-1", "llm/gke-2"} <= set(cache.items)
    assert sum(key.startswith("aaa/") for key in cache.items) == 3


def test_many_namespaces_flooding_stay_under_a_ceiling_over_all() -> None:
    """Each namespace under its own bound, all of them together under the ceiling (many
    tenants, or a cluster-wide ``edit`` binding, each flooding)."""
    flood = [event(f"f{n}", "p", f"ns-{n % 10}") for n in range(40)]
    cache, _ = reflector(flood[:20], limit=3, total=12)
    cache._list()
    assert len(cache.items) == 12
    for obj in flood[20:]:
        cache._apply({"type": "ADDED", "object": obj})
    assert len(cache.items) == 12 and cache.dropped == 28


def test_a_stamped_pods_events_are_kept_past_every_flood() -> None:
    """A trial: ten namespaces snapready does not track, 2,000 Events each, filled the ceiling,
    and a stamped pod's fallback Event was not kept (its outcome waited for the settle time).
    Events about a pod the pod cache holds are kept first, ``MAX_EVENTS_PER_STAMPED_POD`` per
    pod, beside both bounds; a flood naming that pod is held to them."""
    stamped = {"llm/server-1": "u-server-1", "llm/server-2": "u-server-2"}
    flood = [event(f"f{n}", "p", f"ns-{n % 10}") for n in range(40)]
    cache, _ = reflector(flood[:20], limit=3, total=12, stamped=stamped.get)
    cache._list()
    for obj in flood[20:]:
        cache._apply({"type": "ADDED", "object": obj})
    assert len(cache.items) == 12, "the flood fills the ceiling"
    cache._apply({"type": "ADDED", "object": event("gke-1", "server-1", "llm")})
    assert "llm/gke-1" in cache.items, "a stamped pod's Event is kept past the ceiling"
    assert ("llm", "server-1") in cache.view
    cache._apply({"type": "ADDED", "object": event("other", "not-stamped", "llm")})
    assert "llm/other" not in cache.items, "an unstamped pod's Event is not"

    per_pod = MAX_EVENTS_PER_STAMPED_POD
    for n in range(per_pod + 5):  # a flood naming the stamped pod itself
        cache._apply({"type": "ADDED", "object": event(f"x{n}", "server-2", "llm")})
    assert sum(key.startswith("llm/x") for key in cache.items) == per_pod
    assert len(cache.items) == 12 + 1 + per_pod

    cache._apply({"type": "DELETED", "object": event("x0", "server-2", "llm")})
    cache._apply({"type": "ADDED", "object": event("gke-2", "server-2", "llm")})
    assert "llm/gke-2" in cache.items, "a deleted Event frees its pod's room"
    flooded = next(key for key in cache.items if key.startswith("ns-"))
    namespace, name = flooded.split("/")
    cache._apply({"type": "DELETED", "object": event(name, "p", namespace)})
    assert len(cache.items) == 12 + per_pod, "a flood Event's delete frees the ceiling's room"
    cache._apply({"type": "ADDED", "object": event("other2", "not-stamped", "llm")})
    assert "llm/other2" in cache.items


def test_a_gone_pods_events_are_dropped_and_an_earlier_pod_of_its_name_owns_nothing() -> None:
    """A trial: a tenant who creates a stamped pod, writes 8 Events naming it and deletes it,
    again and again, piled up Events no bound counted (1,600 with the pod cache empty); and
    Events of an earlier pod of the same name (a StatefulSet's ``llm-0``) held the new pod's
    room. Owners are pods by uid, and a gone pod's Events are dropped."""
    live: dict[str, str] = {}
    cache, _ = reflector([], limit=3, total=12, stamped=live.get)
    cache._list()
    for round_ in range(20):
        live["llm/churn"] = f"u-{round_}"
        for n in range(MAX_EVENTS_PER_STAMPED_POD):
            obj = event(f"c{round_}-{n}", "churn", "llm")
            obj["involvedObject"]["uid"] = f"u-{round_}"
            cache._apply({"type": "ADDED", "object": obj})
        cache.forget_owner(f"llm/churn/u-{round_}")  # the pod left the pod cache
        del live["llm/churn"]
    assert len(cache.items) <= 3, "only the namespace's own bound holds what is left"

    live["llm/llm-0"] = "new-uid"
    for n in range(MAX_EVENTS_PER_STAMPED_POD):
        old = event(f"old-{n}", "llm-0", "llm")  # the earlier pod's uid
        cache._apply({"type": "ADDED", "object": old})
    gke = event("gke", "llm-0", "llm")
    gke["involvedObject"]["uid"] = "new-uid"
    cache._apply({"type": "ADDED", "object": gke})
    assert "llm/gke" in cache.items, "the new pod's room is its own"


def test_the_events_list_waits_for_the_pod_cache() -> None:
    """A replica's caches start together; an Events list done before the pods' found no owner,
    and a flood from other namespaces pushed out a stamped pod's Event (a trial). The Events
    cache lists once the pod cache has."""
    (gke,) = (
        r
        for r in resources("snapready.io/", stamped=lambda _: None, pods_listed=lambda: False)
        if r.name == "gkeevents"
    )
    assert gke.waits_for is not None and not gke.waits_for()
    listed = [False]
    resource = dataclasses.replace(gke, waits_for=lambda: listed[0])
    transport = Watchless([event("e", "p")])
    waiting = Reflector(resource, transport, Timing(), threading.Lock(), lambda: None)  # type: ignore[arg-type]
    waiting.start()
    try:
        time.sleep(0.3)
        assert not waiting.synced and transport.lists == 0, "no list before the pod cache's"
        listed[0] = True
        wait_for("the Events listed", lambda: waiting.synced, 5)
        assert transport.lists == 1 and "ns/e" in waiting.items
    finally:
        waiting.stop()
        assert waiting.join(5)


class Watchless(Listing):
    """``Listing`` that counts lists and whose watch fails (the reflector backs off)."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        super().__init__(objects)
        self.lists = 0

    def list(
        self, path: str, *, page_size: int, each: Callable[[dict[str, Any]], None]
    ) -> tuple[list[dict[str, Any]], str]:
        self.lists += 1
        return super().list(path, page_size=page_size, each=each)

    def watch(self, path: str, **_: Any) -> Any:
        raise TransportError("no watch here")


def test_a_list_keeps_no_events_of_a_pod_gone_while_it_paged() -> None:
    """A review: the pod was deleted while the Events list paged; ``forget_owner`` saw the
    values before the list, and the list then installed the gone pod's Events, owned and
    uncounted. Installing a list drops values whose owner is gone."""
    live = {"llm/server": "u-server"}
    flood = [event(f"gke-{n}", "server", "llm") for n in range(4)]
    for obj in flood:
        obj["involvedObject"]["uid"] = "u-server"

    class Deleting(Listing):
        def list(
            self, path: str, *, page_size: int, each: Callable[[dict[str, Any]], None]
        ) -> tuple[list[dict[str, Any]], str]:
            found = super().list(path, page_size=page_size, each=each)
            live.clear()  # the pod is deleted before the list is installed
            return found

    (gke,) = (r for r in resources("snapready.io/", stamped=live.get) if r.name == "gkeevents")
    cache = Reflector(
        dataclasses.replace(gke, max_per_namespace=1, max_items=1),
        Deleting(flood),  # type: ignore[arg-type]
        Timing(),
        threading.Lock(),
        lambda: None,
    )
    cache._list()
    assert len(cache.items) <= 1 and not cache._bound.owners


def test_a_relist_tells_the_listeners_of_what_vanished_without_a_watch() -> None:
    """Pods deleted while no watch ran (a relist after 410 Gone) were never reported gone, so
    their Events stayed owned (a review); a relist now calls ``after(old, None)`` for them."""
    heard: list[tuple[Any, Any]] = []
    (pods,) = (r for r in resources("snapready.io/") if r.name == "pods")
    listing = Listing([pod("a"), pod("b")])
    cache = Reflector(
        dataclasses.replace(pods, after=lambda old, new: heard.append((old, new))),
        listing,  # type: ignore[arg-type]
        Timing(),
        threading.Lock(),
        lambda: None,
    )
    cache._list()
    listing.objects = [pod("a")]
    heard.clear()
    cache._list()
    gone = [old.name for old, new in heard if new is None]
    assert gone == ["b"]


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "llm",
            "uid": "u-" + name,
            "resourceVersion": "1",
            "labels": {"snapready.io/selected": "true"},
            "annotations": {"snapready.io/spec-hash": "v1:sha256:" + "0" * 64},
        },
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
