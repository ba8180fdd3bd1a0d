"""Building blocks of the cluster caches: the API transport contract, timing and worker threads.

``cluster.api.transport`` implements ``Transport`` with the ``kubernetes`` client; ``reflector.py``
runs list-then-watch loops on it; ``Poller`` re-reads single documents such as ``/version``. Every
worker is a daemon thread with a stop event, a ``synced`` flag and a ``status`` string for
``/readyz``; state changes happen under one lock shared with the source, which rebuilds the
immutable ``ClusterState`` (the admission path never takes that lock).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from webhook.base.errors import SnapreadyError
from webhook.base.types import RawObject

log = logging.getLogger("snapready.kube")
RESTART = 5.0
"""Seconds before a cache thread that raised an unexpected error starts over."""


class NotServed(SnapreadyError):
    """The resource's API group/version is not served (HTTP 404: CRD or API not installed)."""


class Gone(SnapreadyError):
    """The resourceVersion is too old (HTTP 410 or a watch ERROR event with code 410): relist."""


class TransportError(SnapreadyError):
    """Any other API failure: HTTP status, connection error, timeout or undecodable body."""


class Conflict(TransportError):
    """HTTP 409: the object already exists (create) or changed meanwhile (update)."""


class WatchStream(Protocol):
    """An open watch: iterates decoded events (``{"type": ..., "object": {...}}``)."""

    def __iter__(self) -> Iterator[RawObject]: ...

    def close(self) -> None:
        """Abort the stream from another thread (the iterating thread then ends)."""


class Transport(Protocol):
    """The API calls a reflector needs. Every method raises NotServed, Gone or TransportError."""

    def list(
        self, path: str, *, page_size: int, each: Callable[[RawObject], None] | None = None
    ) -> tuple[list[RawObject], str]:
        """All items of ``path`` (following ``continue``) and the list's resourceVersion; with
        ``each``, items are handed over page by page instead of returned."""
        ...

    def watch(self, path: str, *, resource_version: str, timeout_seconds: int) -> WatchStream:
        """Open a watch with bookmarks from ``resource_version``."""
        ...

    def get(self, path: str) -> RawObject:
        """One JSON document (``/version``)."""
        ...


@dataclass(frozen=True)
class Resource:
    """One watched resource.

    Attributes:
        name: plural name, also the ``/readyz`` details key (``podsnapshotpolicies``).
        paths: collection paths, preferred first (``.../v1/...`` then ``.../v1alpha1/...``).
        convert: raw object -> compact value to keep, or None to keep nothing; raises
            ``ConfigError`` for an invalid object (skipped and counted).
        build: the kept values -> the view ``ClusterState`` holds (rebuilt only on change).
        update: optional ``(view, old value, new value) -> view`` for one changed item (None:
            added; None: deleted), equal to ``build`` of the changed values; it must return a
            new view and leave ``view`` alone (readers may hold it). Without it every event
            rebuilds the view from all values.
        after: optional ``(old value, new value)`` listener, called once the store holds the
            change and the state was rebuilt (no lock held): for every ADDED/MODIFIED/DELETED
            event (changed or not; ``new`` None: gone), and ``(None, value)`` for each value of
            a relist. Never called from ``convert``, which only converts.
        in_place: the view is the store's own dict, which events edit in place (``update``
            returns it unchanged; readers look keys up, or iterate over a copy): an event that
            leaves the reflector's status alone changes nothing a new ``ClusterState`` would
            hold, so it publishes none (``after`` still hears it). The stamped pods: each
            created pod is one such event, and the pods watch thread was about a fifth of the
            webhook's CPU while pods were created (perf per thread during ``make
            bench-cluster``), a ``ClusterState`` rebuild per event included.
    """

    name: str
    paths: tuple[str, ...]
    convert: Callable[[RawObject], Any]
    build: Callable[[Mapping[str, Any]], Any]
    update: Callable[[Any, Any, Any], Any] | None = None
    after: Callable[[Any, Any], None] | None = None
    in_place: bool = False
    max_per_namespace: int | None = None
    """Values kept at most per namespace (None: all): a collection anyone in a namespace can
    write to (core Events) must not grow the webhook's memory without bound, nor may one
    namespace's flood crowd out another's objects; past it a namespace's new objects are not
    kept (logged once; ``Reflector.dropped`` counts them) until some of its are deleted."""
    max_items: int | None = None
    """Values kept at most over all namespaces (None: no ceiling): objects of namespaces past it
    are not kept either (many namespaces each flooding must not outgrow the memory limit)."""
    owner: Callable[[Any], str | None] | None = None
    """Optional ``value -> owner`` (None: no owner): up to ``max_per_owner`` values of each
    owner are kept whatever ``max_per_namespace`` and ``max_items`` say, and are not counted
    in them. GKE's Events about a pod snapready stamped (the owner: that pod, by uid): a flood
    of Events in namespaces that snapready does not track (or in others') must not push out the
    few that decide a stamped pod's outcome (a trial); an owner's values are dropped when it is
    gone (``Reflector.forget_owner``), so they stay bounded by the pods the pod cache holds."""
    max_per_owner: int = 0
    waits_for: Callable[[], bool] | None = None
    """Optional: the first list waits until this says True (the GKE Events wait for the pod
    cache's first list, or no Event listed at start would find its owner)."""


@dataclass(frozen=True)
class Timing:
    """Seconds for backoff (with jitter), watch length, not-served re-checks; list page size."""

    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    watch_timeout: float = 300.0
    recheck: float = 300.0
    page_size: int = 500


class Backoff:
    """Exponential backoff with "equal jitter": each delay is in [d/2, d), d doubling to max."""

    def __init__(self, timing: Timing) -> None:
        self._timing = timing
        self._attempt = 0
        self._random = random.Random()  # noqa: S311 - jitter, not cryptography

    def next(self) -> float:
        """The next delay in seconds (grows until ``backoff_max``)."""
        growth: float = 2.0**self._attempt
        ceiling = min(self._timing.backoff_max, self._timing.backoff_initial * growth)
        self._attempt = min(self._attempt + 1, 32)
        return ceiling / 2 + self._random.uniform(0, ceiling / 2)

    def reset(self) -> None:
        """Back to the initial delay after a success."""
        self._attempt = 0


def object_key(obj: RawObject) -> str | None:
    """``namespace/name`` (namespaced) or ``name`` (cluster-scoped); None without a name."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        return None
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata['name']}" if namespace else str(metadata["name"])


def resource_version(obj: Any) -> str | None:
    """``metadata.resourceVersion`` of an object or bookmark, if present."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    value = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    return str(value) if value else None


class Worker:
    """A daemon thread with a stop event, a ``synced`` flag and a ``status`` string.

    Attributes:
        lock: shared with the source; held while the store changes and the state is rebuilt.
        on_change: called (lock held) whenever the view or the status changed.
    """

    def __init__(self, name: str, lock: threading.Lock, on_change: Callable[[], None]) -> None:
        self.name = name
        self.lock = lock
        self.on_change = on_change
        self.synced = False
        self.status = "syncing"
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the background thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._guarded, name=f"snapready-{self.name}", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end; ``join`` waits for it."""
        self._stopping.set()

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds; True when the thread has ended."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    @property
    def stopping(self) -> bool:
        """True once ``stop()`` was called."""
        return self._stopping.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when stopping (the caller returns)."""
        return self._stopping.wait(seconds)

    def set_status(self, status: str, *, synced: bool | None = None) -> None:
        """Update status (and synced) and publish when either changed."""
        with self.lock:
            new_synced = self.synced if synced is None else synced
            if status == self.status and new_synced == self.synced:
                return
            self.status, self.synced = status, new_synced
            self.on_change()

    def _guarded(self) -> None:
        # A bug must neither kill the cache silently nor spin: log it, wait, start over.
        while not self.stopping:
            try:
                self.run()
                return
            except Exception:
                log.exception("%s: cache thread failed; restarting in %.0f s", self.name, RESTART)
                self.set_status("failed (see logs), restarting")
            if self.wait(RESTART):
                return

    def run(self) -> None:
        """The loop body (subclasses)."""
        raise NotImplementedError


def describe(exc: BaseException) -> str:
    """Short, secret-free text for an error (no headers, no tokens)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


class Poller(Worker):
    """GETs one document every ``timing.recheck`` seconds; ``value`` = ``convert(document)``.

    404 makes ``value`` None with status ``not served`` (still synced: the answer is "unknown").
    """

    def __init__(
        self,
        name: str,
        path: str,
        convert: Callable[[RawObject], Any],
        *,
        transport: Transport,
        timing: Timing,
        lock: threading.Lock,
        on_change: Callable[[], None],
    ) -> None:
        super().__init__(name, lock, on_change)
        self.path, self.convert, self.transport, self.timing = path, convert, transport, timing
        self.value: Any = None

    def run(self) -> None:
        """Poll until stopped; back off with jitter on errors."""
        backoff = Backoff(self.timing)
        while not self.stopping:
            try:
                value = self.convert(self.transport.get(self.path))
                status, delay = "synced", self.timing.recheck
                backoff.reset()
            except NotServed:
                value, status, delay = None, "not served", self.timing.recheck
            except (TransportError, Gone) as exc:
                log.warning("%s: %s; retrying with backoff", self.name, describe(exc))
                value, delay = self.value, backoff.next()
                status = (
                    f"{'synced, retrying' if self.synced else 'syncing, error'}: {describe(exc)}"
                )
            with self.lock:
                changed = value != self.value or status != self.status or not self.synced
                self.value, self.status = value, status
                self.synced = self.synced or not status.startswith("syncing")
                if changed:
                    self.on_change()
            if self.wait(delay):
                return
