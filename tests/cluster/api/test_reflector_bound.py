"""A cache of objects anyone in a namespace may write (core Events) keeps a bounded number.

Anyone allowed to create Events in a namespace (the built-in ``edit`` role) can create them with
GKE's reason ``GKEPodSnapshotting``; every snapready replica keeps each one (a hostile trial
measured ~1.5 KiB each: 100-180k within the Events' 1 h life outgrow the chart's memory limit).
``Resource.max_items`` bounds the reflector on its list and its watch; the GKE Events cache uses
it (``caches.MAX_GKE_EVENTS``). The reflector is driven here without a thread: a list, then
watch events, as its loop feeds them.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from webhook.cluster.api.caches import MAX_GKE_EVENTS, resources
from webhook.cluster.api.reflector import Reflector
from webhook.cluster.api.syncing import Timing
from webhook.snapshots.evidence import GKE_EVENT_REASON


def event(name: str, pod: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"},
        "involvedObject": {"kind": "Pod", "namespace": "ns", "name": pod, "uid": "u-" + pod},
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


def reflector(objects: list[dict[str, Any]], limit: int) -> tuple[Reflector, list[int]]:
    (gke,) = (r for r in resources("snapready.io/") if r.name == "gkeevents")
    changes: list[int] = []
    bounded = Reflector(
        dataclasses.replace(gke, max_items=limit),
        Listing(objects),  # type: ignore[arg-type]
        Timing(),
        threading.Lock(),
        lambda: changes.append(1),
    )
    return bounded, changes


def test_the_gke_events_cache_is_bounded() -> None:
    (gke,) = (r for r in resources("snapready.io/") if r.name == "gkeevents")
    assert gke.max_items == MAX_GKE_EVENTS == 10_000


def test_a_list_and_a_watch_keep_at_most_the_bound_and_say_so() -> None:
    cache, changes = reflector([event(f"e{n}", f"pod-{n}") for n in range(5)], limit=3)
    cache._list()
    assert len(cache.items) == 3 and cache.dropped == 2
    assert cache.status == "synced (at most 3 kept, later ones not)"
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
