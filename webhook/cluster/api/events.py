"""Kubernetes Events (``events.k8s.io/v1``) written by the leader: aggregated and rate-limited.

Like client-go's event recorder with the ``events.k8s.io`` API: the first occurrence of an event
(same object, type, reason, action and note) is created; repeats update its ``series``
(``count``, ``lastObservedTime``) instead of creating new objects. Token buckets bound the write
rate, one per namespace (``burst`` events, refilled at ``per_second``) within one for the whole
process (``total_burst``, ``total_per_second``); an event over either limit is dropped and counted
(``dropped``, ``snapready_events_total{result="dropped"}``), never queued without bound. The
token is taken from both or from neither, so one namespace's flood (a tenant's thousand failing
pods) is refused by its own bucket and takes at most its own share of the process's (25 at once,
then one every 2 s of the process's 5 a second): the Warnings of other namespaces still get
through, whatever order a pass reports namespaces in. Several namespaces flooding at once share
the process's limit with everyone (its purpose: the API server's load). client-go bounds each
object's events alike (``EventSourceObjectSpamFilter``, k8s.io/client-go
tools/record/events_cache.go: burst 25 per source and object), and the API server's
EventRateLimit admission plugin offers ``server`` and ``namespace`` limits for the same reason.
Only the leader writes: the caller checks ``is_leader`` (this module never decides it) and the
transport is lease-fenced (``cluster.api.fence``).

Names and hand-overs (docs/operations/leader-election.md): the first write of an event uses the
deterministic name ``<regarding>.<key[:16]>``, so a new leader reporting the same occurrence meets
the old leader's event (409) and leaves it as it is (``already``: nothing is written twice). A 409
on an event that is not snapready's own (another ``reportingController``, reason, type, action, note
or ``regarding``: a user pre-created the name) is never reused: the event is created under a
server-generated name (``generateName``) instead, so no Warning can be swallowed.
Events are about observed cluster objects, never about admission requests, so a dry-run request
never produces one.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from webhook.base.bucket import Bucket
from webhook.base.types import RawObject
from webhook.cluster.api.syncing import Conflict, NotServed, TransportError, describe

log = logging.getLogger("snapready.events")
REPORTING_CONTROLLER = "snapready.io/snapready"
MAX_NOTE_BYTES = 1024
"""events.k8s.io/v1 ``note`` limit (k8s.io/kubernetes pkg/apis/events validation)."""
MAX_TRACKED = 4096
"""Aggregation keys remembered (oldest forgotten first)."""
MAX_NAMESPACE_BUCKETS = 4096
"""Namespaces whose buckets are remembered; beyond that the least recently used full one is
forgotten (a full bucket is what a new one is), else the least recently used (it then starts
full again: bounded by the process's bucket all the same)."""
DROP_LOG_SECONDS = 10.0
"""At most one log line about dropped Events per this many seconds."""
EVENT_RESULTS = ("written", "already", "dropped", "failed")
"""What became of an event (``EventRecorder.results``): created or counted in its series, found
already written by an earlier leader, dropped by a rate limit, or refused by the API server."""


class EventTransport(Protocol):
    """POST a new object, GET and merge-patch an existing one."""

    def create(self, path: str, body: RawObject) -> RawObject: ...

    def get(self, path: str) -> RawObject: ...

    def merge_patch(self, path: str, patch: RawObject, *, field_manager: str) -> RawObject: ...


@dataclass(frozen=True)
class Regarding:
    """The object an event is about (``regarding``)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    def to_json(self) -> RawObject:
        """The ``regarding`` object reference."""
        ref: RawObject = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
        }
        if self.uid:
            ref["uid"] = self.uid
        return ref


@dataclass(frozen=True)
class Event:
    """One occurrence: about ``regarding``, ``type`` Warning/Normal, a reason, action and note."""

    regarding: Regarding
    type: str
    reason: str
    action: str
    note: str

    @property
    def key(self) -> str:
        """Aggregation identity: object, type, reason, action and note (client-go's)."""
        r = self.regarding
        parts = (r.namespace, r.kind, r.name, self.type, self.reason, self.action, self.note)
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def body(self, name: str, now: str, instance: str) -> RawObject:
        """The events.k8s.io/v1 Event object (note cut to ``MAX_NOTE_BYTES``)."""
        return {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": self.regarding.namespace},
            "eventTime": now,
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": instance,
            "action": self.action,
            "reason": self.reason,
            "type": self.type,
            "note": self.note.encode()[:MAX_NOTE_BYTES].decode(errors="ignore"),
            "regarding": self.regarding.to_json(),
        }


def event_name(event: Event) -> str:
    """``<regarding>.<key[:16]>``, a valid object name (a DNS subdomain, 253 characters at
    most) for any object name: a long name is cut to leave the key whole (else the events of
    one long-named pod shared a name, and a 252-character one ended in ``.``), without a ``.``
    or ``-`` where the cut falls."""
    return f"{event.regarding.name[:236].rstrip('.-')}.{event.key[:16]}"


def micro_time(now: float) -> str:
    """A ``MicroTime`` (``2026-12-01T10:00:00.123456Z``)."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def is_own(existing: RawObject, event: Event) -> bool:
    """Whether ``existing`` is this very event as snapready writes it (controller, type, reason,
    action, note and ``regarding``), so that a 409 on its name may continue it."""
    mine = event.body("", "", "")
    keys = ("reportingController", "type", "reason", "action", "note")
    if any(existing.get(key) != mine[key] for key in keys):
        return False
    regarding = existing.get("regarding")
    if not isinstance(regarding, dict):
        return False
    want = mine["regarding"]
    return all(regarding.get(key) == want.get(key) for key in ("kind", "namespace", "name", "uid"))


def _count(event: RawObject) -> int:
    """Occurrences an existing event records (its ``series.count``, else 1)."""
    series = event.get("series")
    count = series.get("count") if isinstance(series, dict) else None
    return count if isinstance(count, int) and count > 0 else 1


@dataclass
class _Sent:
    name: str
    count: int


class EventRecorder:
    """Writes Warning/Normal events; aggregates repeats into a series; rate-limited.

    Args:
        transport: the API (``KubeTransport``).
        instance: ``reportingInstance`` (this replica's identity).
        burst, per_second: each namespace's token bucket (default 25 events at once, then 1
            every 2 s).
        total_burst, total_per_second: the process's (default 100 at once, then 5 a second:
            ten namespaces at their limit).
        clock: seconds since the epoch (tests pass their own).

    ``written``, ``already``, ``dropped``, ``failed`` count ``EVENT_RESULTS``; ``renamed`` the
    written events whose name was taken (see the module docstring).
    """

    def __init__(
        self,
        transport: EventTransport,
        instance: str,
        *,
        burst: int = 25,
        per_second: float = 0.5,
        total_burst: int = 100,
        total_per_second: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.transport, self.instance, self.clock = transport, instance[:128], clock
        self.burst, self.per_second = burst, per_second
        self._total = Bucket(total_burst, total_per_second, clock)
        self._buckets: OrderedDict[str, Bucket] = OrderedDict()
        self._sent: OrderedDict[str, _Sent] = OrderedDict()
        self._lock = threading.Lock()
        self.written = self.dropped = self.already = self.renamed = self.failed = 0
        self._unlogged, self._logged_at = 0, float("-inf")

    @property
    def results(self) -> dict[str, int]:
        """Events by ``EVENT_RESULTS`` since the process started."""
        return {result: getattr(self, result) for result in EVENT_RESULTS}

    def _take(self, namespace: str) -> bool:
        """A token of ``namespace``'s bucket and one of the process's, or neither (lock held):
        a refused namespace never drains the process's, nor a full process its namespaces'."""
        bucket = self._buckets.get(namespace)
        if bucket is None:
            if len(self._buckets) >= MAX_NAMESPACE_BUCKETS:
                full = next((ns for ns, b in self._buckets.items() if b.full()), None)
                if full is not None:
                    del self._buckets[full]
                else:
                    self._buckets.popitem(last=False)
            bucket = self._buckets[namespace] = Bucket(self.burst, self.per_second, self.clock)
        else:
            self._buckets.move_to_end(namespace)
        if not (bucket.available() and self._total.available()):
            return False
        return bucket.take() and self._total.take()

    def emit(self, event: Event) -> bool:
        """Record one occurrence; True when it was written (created or counted in a series).

        Errors are logged, never raised: an event is best effort. Drops are logged at most once
        per ``DROP_LOG_SECONDS``, with how many there were (a flood is one line, not one per
        Event).
        """
        where = f"{event.regarding.namespace}/{event.regarding.name}"
        with self._lock:
            taken = self._take(event.regarding.namespace)
            if not taken:
                self.dropped += 1
                self._unlogged += 1
            if self._unlogged and self.clock() - self._logged_at >= DROP_LOG_SECONDS:
                # a flood's first drop, then its count every 10 s (the last ones with the next
                # Event, dropped or not)
                log.warning(
                    "%d event(s) dropped by the rate limit since the last such line; "
                    "the latest now: %s on %s (%s)",
                    self._unlogged,
                    event.reason,
                    where,
                    "dropped" if not taken else "written",
                )
                self._unlogged, self._logged_at = 0, self.clock()
            if not taken:
                return False
            sent = self._sent.get(event.key)
        try:
            sent, wrote = self._write(event, sent)
        except (TransportError, NotServed) as exc:
            log.warning("event %s on %s not written: %s", event.reason, where, describe(exc))
            with self._lock:
                self.failed += 1
            return False
        with self._lock:
            self._sent[event.key] = sent
            self._sent.move_to_end(event.key)
            while len(self._sent) > MAX_TRACKED:
                self._sent.popitem(last=False)
            if wrote:
                self.written += 1
            else:
                self.already += 1
        return True

    def _write(self, event: Event, sent: _Sent | None) -> tuple[_Sent, bool]:
        """Create the event, or count one more occurrence in its series (created again when
        it expired meanwhile: a 404); ``(sent, written)``, written False when an earlier leader
        had written this very occurrence."""
        now = micro_time(self.clock())
        base = f"/apis/events.k8s.io/v1/namespaces/{event.regarding.namespace}/events"
        if sent is None:
            name = event_name(event)
            try:
                self.transport.create(base, event.body(name, now, self.instance))
                return _Sent(name, 1), True
            except Conflict:
                existing = self.transport.get(f"{base}/{name}")
            if is_own(existing, event):  # an earlier leader's: the same occurrence
                return _Sent(name, _count(existing)), False
            # Someone else's object under our name: never reuse it, never bump its count.
            body = event.body(name, now, self.instance)
            metadata = body["metadata"]
            del metadata["name"]
            # the API server appends 5 characters
            metadata["generateName"] = f"{name[:200].rstrip('.-')}-"
            created = self.transport.create(base, body)
            self.renamed += 1
            log.warning(
                "event name %s/%s is taken by an object snapready did not write: %s created "
                "under a generated name",
                event.regarding.namespace,
                name,
                event.reason,
            )
            actual = str((created.get("metadata") or {}).get("name") or name)
            return _Sent(actual, 1), True
        series = {"series": {"count": sent.count + 1, "lastObservedTime": now}}
        try:
            self.transport.merge_patch(f"{base}/{sent.name}", series, field_manager="snapready")
        except NotServed:  # it expired (the API server's --event-ttl, 1 h by default)
            return self._write(event, None)  # a new Event (the same name is free again)
        sent.count += 1
        return sent, True
