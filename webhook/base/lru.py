"""``Lru``: a bounded, thread-safe memo (base layer: imports nothing from the package).

The request path remembers what replicas of one template repeat (their fingerprint and field
digests, ``webhook.pod.memo``; their node selection, ``webhook.pod.node_pins``). Each memo is
bounded, since admission runs before the API server validates a pod and a tenant chooses what
arrives, and thread-safe, since the validating call of a blocking group runs in a worker thread.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Lru(Generic[K, V]):
    """At most ``size`` entries, the least recently used (read or written) out first.

    A value is computed outside the lock by the caller (two threads may compute the same value;
    the second ``put`` wins, equal by construction). ``None`` is not a storable value: ``get``
    returns it for "not remembered".
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The remembered value of ``key`` (now the most recently used), or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        """Remember ``value`` for ``key``; the least recently used entry goes beyond ``size``."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries
