"""Writes fenced by the Lease: no write leaves a replica that cannot prove it still leads.

A replica frozen (SIGSTOP, a long GC pause, a throttled cgroup) past the lease duration wakes up
still believing it leads: without this fence the ex-leader of a 30 s freeze wrote origin records and
Events for 9.75 s after another replica had taken the Lease. The proof is time: the Lease is held
for ``renew_deadline_seconds`` after the start of the last successful renew, measured on the
monotonic clock (``time.monotonic``, which keeps running while the process is stopped), and the
other replicas cannot acquire it before ``lease_duration_seconds`` (> renew deadline, enforced by
``LeaderSettings``) since they last saw it change. So a woken process holds nothing until its
next renew succeeds.

``FencedTransport`` wraps the API transport of every writer (Events, origin records, the outcome
annotation, the readiness gate, relabelling, refresh triggers, prunes): each write method asks
``holds()`` immediately before the request and raises ``NotLeader`` (a ``TransportError``, so
every writer's error path already handles it: not written, retried by the next leader) when the
Lease is not provably held.
Reads pass through. What remains is the request already on the wire when a freeze begins: it is
bounded by the request timeout, not by the freeze (see docs/operations/leader-election.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from webhook.base.types import RawObject
from webhook.cluster.api.syncing import TransportError


class NotLeader(TransportError):
    """This replica does not provably hold the Lease now: nothing was sent."""


class FencedTransport:
    """The API transport with every write guarded by ``holds()`` (reads unguarded).

    Args:
        inner: the real transport (``KubeTransport``).
        holds: True while this replica provably holds the Lease (``LeaderElector.is_leader``).
    """

    def __init__(self, inner: Any, holds: Callable[[], bool]) -> None:
        self.inner, self.holds = inner, holds
        self.refused = 0
        """Writes refused because the Lease was not held (tests and ``/readyz`` detail)."""

    def _check(self, what: str, path: str) -> None:
        if not self.holds():
            self.refused += 1
            raise NotLeader(f"{what} {path} not sent: this replica does not hold the Lease")

    def get(self, path: str) -> RawObject:
        """One JSON document (unguarded)."""
        result: RawObject = self.inner.get(path)
        return result

    def list(self, path: str, **options: Any) -> Any:
        """A list (unguarded)."""
        return self.inner.list(path, **options)

    def watch(self, path: str, **options: Any) -> Iterator[RawObject]:
        """A watch (unguarded)."""
        stream: Iterator[RawObject] = self.inner.watch(path, **options)
        return stream

    def create(self, path: str, body: RawObject) -> RawObject:
        """POST, if the Lease is held (``NotLeader`` otherwise)."""
        self._check("POST", path)
        result: RawObject = self.inner.create(path, body)
        return result

    def delete(self, path: str, *, uid: str = "") -> RawObject:
        """DELETE (uid precondition), if the Lease is held."""
        self._check("DELETE", path)
        result: RawObject = self.inner.delete(path, uid=uid)
        return result

    def patch(
        self, path: str, ops: Sequence[RawObject], *, field_manager: str = "snapready"
    ) -> RawObject:
        """JSON Patch, if the Lease is held."""
        self._check("PATCH", path)
        result: RawObject = self.inner.patch(path, ops, field_manager=field_manager)
        return result

    def merge_patch(
        self, path: str, patch: RawObject, *, field_manager: str = "snapready"
    ) -> RawObject:
        """JSON merge patch, if the Lease is held."""
        self._check("PATCH", path)
        result: RawObject = self.inner.merge_patch(path, patch, field_manager=field_manager)
        return result

    def strategic_patch(
        self, path: str, patch: RawObject, *, field_manager: str = "snapready"
    ) -> RawObject:
        """Strategic merge patch, if the Lease is held."""
        self._check("PATCH", path)
        result: RawObject = self.inner.strategic_patch(path, patch, field_manager=field_manager)
        return result
