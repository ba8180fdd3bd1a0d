"""The garbage collector around the first sync of the caches (cluster mode).

CPython's cyclic collector scans the young generations every ``threshold0`` (700) net container
allocations and, as the heap grows, the whole of it again and again (a full collection whenever
the long-lived objects grew by a quarter). Listing 20,000 pods decodes pages of 500 pods (~150,000
dicts and lists each, garbage a moment later) while the caches grow to ~2 million objects: py-spy
put 55% of a scale sync's busy samples in ``gc_collect_main`` (``make bench-scale --profile``,
docs/performance.md). None of those objects can form a cycle worth finding: the JSON pages are trees
freed by reference counting, the cache values are flat frozen dataclasses.

So, as Instagram's Django servers and CPython's ``gc.freeze`` documentation do it:

* ``begin_sync`` (at start, cluster mode only): freeze what the imports built, and raise the
  young threshold to ``SYNC_THRESHOLD0`` while the caches list;
* ``end_sync`` (once, when every cache has listed): one full collection, then ``gc.freeze()``:
  the caches move to the permanent generation, which no later collection scans, so the full
  collections that still happen while serving only walk what changed since; the thresholds go
  back to what they were.

Objects frozen and freed later are freed by reference counting as usual; only a garbage cycle
among frozen objects would stay (none is made by the caches). ``gc.unfreeze`` is never needed.
"""

from __future__ import annotations

import gc
import logging
import threading
import time

log = logging.getLogger("snapready.kube")

SYNC_THRESHOLD0 = 100_000
"""Young-generation threshold during the first list: above one decoded page of pods, so a page
is garbage before a collection would scan it (measured on review 03's pod, 40 pages of 500:
GC time 3.1 s at 700, 0.6 s at 20,000, 0.1 s at 100,000; a full collection after: 85 ms)."""


class _Heap:
    """The process-wide state of ``begin_sync``/``end_sync`` (the collector is process-wide)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.saved: tuple[int, int, int] | None = None
        self.ended = False


_HEAP = _Heap()


def begin_sync() -> None:
    """Freeze the start-up objects and raise the young threshold until ``end_sync``.

    Idempotent; a no-op after ``end_sync`` (a relist later runs with the normal thresholds).
    """
    with _HEAP.lock:
        if _HEAP.saved is not None or _HEAP.ended:
            return
        gc.freeze()
        _HEAP.saved = gc.get_threshold()
        gc.set_threshold(SYNC_THRESHOLD0, *_HEAP.saved[1:])


def end_sync() -> None:
    """After the first complete sync: collect once, freeze the caches, restore the thresholds.

    Runs once per process (later calls return at once). Holds the interpreter for one full
    collection (~0.1 s at 20,000 pods), before the replica reports ready.
    """
    with _HEAP.lock:
        if _HEAP.ended:
            return
        _HEAP.ended = True
        started = time.perf_counter()
        found = gc.collect()
        gc.freeze()
        if _HEAP.saved is not None:
            gc.set_threshold(*_HEAP.saved)
            _HEAP.saved = None
        frozen = gc.get_freeze_count()
    log.info(
        "heap: %d objects frozen after the first sync (%d unreachable collected, %.0f ms)",
        frozen,
        found,
        (time.perf_counter() - started) * 1000,
    )
