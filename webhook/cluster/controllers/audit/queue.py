"""The stamped pods the audit judges between its passes (``cluster.controllers.audit``).

The pod cache calls ``AuditWorker.observe`` for every stamped pod it holds (thousands per
second during a relist), so what happens there is O(1): compare the pod's *shape* (its recorded
restore outcome, whether it has finished) with the shape it had when the audit last judged it,
and queue it when the two differ or it was never judged. The shapes are interned: a handful of
distinct tuples shared by 20,000 pods. The worker drains the queue in order (oldest first),
each pod judged once however often it was queued.
"""

from __future__ import annotations

import collections
import threading

from webhook.base.types import RawObject, mapping
from webhook.snapshots.audit import TERMINAL_PHASES

Shape = tuple[str | None, bool]
"""(recorded ``<prefix>restore-outcome`` or None, finished): what makes a pod's report change
without its spec changing."""


class StampedQueue:
    """Pods to judge by uid, and the shape each had when judged (thread-safe).

    Args:
        outcome_key: ``<prefix>restore-outcome`` (the leader's recorded outcome).
    """

    def __init__(self, outcome_key: str) -> None:
        self.outcome_key = outcome_key
        self._queue: collections.OrderedDict[str, tuple[str, str]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._judged: dict[str, Shape] = {}
        self._shapes: dict[Shape, Shape] = {}

    def __len__(self) -> int:
        return len(self._queue)

    def judged(self, uid: str) -> bool:
        """Whether the audit judged pod ``uid`` in this term."""
        return uid in self._judged

    def offer(self, uid: str, namespace: str, name: str, shape: Shape) -> bool:
        """Queue the pod unless it was judged with this shape; True when queued."""
        if self._judged.get(uid) == shape:
            return False
        with self._lock:
            self._queue[uid] = (namespace, name)
        return True

    def add(self, uid: str, namespace: str, name: str) -> None:
        """Queue the pod whatever its shape."""
        with self._lock:
            self._queue[uid] = (namespace, name)

    def pop(self) -> tuple[str, str, str] | None:
        """The oldest queued pod ``(uid, namespace, name)``, or None."""
        with self._lock:
            if not self._queue:
                return None
            uid, (namespace, name) = self._queue.popitem(last=False)
        return uid, namespace, name

    def mark(self, uid: str, shape: Shape) -> None:
        """Pod ``uid`` was judged with ``shape``."""
        self._judged[uid] = self._shapes.setdefault(shape, shape)

    def mark_pod(self, uid: str, pod: RawObject) -> None:
        """Pod ``uid`` was judged as ``pod`` (its shape read from it)."""
        self.mark(uid, self.shape_of(pod))

    def shape_of(self, pod: RawObject) -> Shape:
        """A live pod's shape."""
        outcome = mapping(mapping(pod.get("metadata")).get("annotations")).get(self.outcome_key)
        phase = mapping(pod.get("status")).get("phase")
        return (outcome if isinstance(outcome, str) else None, phase in TERMINAL_PHASES)

    def forget(self, uid: str) -> None:
        """The pod is gone."""
        self._judged.pop(uid, None)

    def clear(self) -> None:
        """A new leadership term: nothing is judged, nothing queued."""
        with self._lock:
            self._queue.clear()
        self._judged.clear()
