"""List-then-watch loops that keep a compact in-memory copy of one API resource (cluster mode).

The shape follows client-go's reflector: list (paginated), then watch from the list's
``resourceVersion`` with ``allowWatchBookmarks``; a watch that ends or drops resumes from the last
resourceVersion seen (object or BOOKMARK); ``410 Gone`` relists; errors back off with jitter; a
resource that is not served (404) counts as synced-and-empty and is re-checked slowly. Only the
compact value ``Resource.convert`` returns is kept per object, never the object itself.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from webhook.base.errors import ConfigError
from webhook.base.types import RawObject
from webhook.cluster.api.syncing import (
    Backoff,
    Gone,
    NotServed,
    Resource,
    Timing,
    Transport,
    TransportError,
    WatchStream,
    Worker,
    describe,
    object_key,
    resource_version,
)

log = logging.getLogger("snapready.kube")


class _Invalid:
    """Marker for an object whose ``convert`` raised ConfigError."""


INVALID: Any = _Invalid()


def convert_item(resource: Resource, key: str, obj: RawObject) -> Any:
    """``resource.convert(obj)``; an invalid object is logged and returns ``INVALID``."""
    try:
        return resource.convert(obj)
    except ConfigError as exc:
        log.warning("%s %s ignored: %s", resource.name, key, exc)
        return INVALID


class _Collected:
    """A list converted as each page arrives: only compact values are kept (bounded memory)."""

    def __init__(self, resource: Resource) -> None:
        self.resource = resource
        self.items: dict[str, Any] = {}
        self.invalid: set[str] = set()
        self.dropped = 0
        self.bound = _Bound(resource)

    def take(self, obj: RawObject) -> None:
        """Convert one listed object and keep its compact value (or count it invalid, or
        dropped past ``resource.max_per_namespace``)."""
        key = object_key(obj) if isinstance(obj, dict) else None
        value = None if key is None else convert_item(self.resource, key, obj)
        if value is INVALID:
            self.invalid.add(str(key))
        elif value is not None and key is not None:
            if key not in self.items and not self.bound.admit(key, len(self.items), value):
                self.dropped += 1
                return
            self.items[key] = value


class _Bound:
    """Values kept per namespace, held to ``resource.max_per_namespace`` and, over all,
    ``resource.max_items`` (no bound set: every value is admitted); values with an owner
    (``resource.owner``) are kept first, ``resource.max_per_owner`` each, beside both."""

    def __init__(self, resource: Resource) -> None:
        self.resource = resource
        self.counts: Counter[str] = Counter()
        self.owned: dict[str, set[str]] = {}  # owner -> keys kept as its values
        self.owners: dict[str, str] = {}  # key -> owner, for values kept as an owner's

    def admit(self, key: str, kept: int, value: Any = None) -> bool:
        """Whether a new ``value`` of ``key`` may be kept beside ``kept`` others (counted if so)."""
        each, total = self.resource.max_per_namespace, self.resource.max_items
        if each is None and total is None:
            return True
        find = self.resource.owner
        owner = find(value) if find is not None and value is not None else None
        if owner is not None and len(self.owned.get(owner, ())) < self.resource.max_per_owner:
            self.owned.setdefault(owner, set()).add(key)
            self.owners[key] = owner
            return True
        namespace = namespace_of(key)
        if (each is not None and self.counts[namespace] >= each) or (
            total is not None and kept - len(self.owners) >= total
        ):
            return False
        self.counts[namespace] += 1
        return True

    def release(self, key: str) -> None:
        """A kept value of ``key`` is gone."""
        if self.resource.max_per_namespace is None and self.resource.max_items is None:
            return
        owner = self.owners.pop(key, None)
        if owner is None:
            self.counts[namespace_of(key)] -= 1
            return
        keys = self.owned.get(owner, set())
        keys.discard(key)
        if not keys:
            self.owned.pop(owner, None)


def namespace_of(key: str) -> str:
    """The namespace part of an ``object_key`` (``""`` for a cluster-scoped object)."""
    return key.split("/", 1)[0] if "/" in key else ""


class Reflector(Worker):
    """Keeps ``view`` = ``resource.build(items)`` in step with the API server.

    Attributes:
        items: key -> compact value (only what ``resource.convert`` kept).
        invalid: keys of objects that failed ``convert`` (shown in the status).
        served: False while the API answers 404 (then ``items`` is empty).
        path: the collection path in use (tells which version is served).
        resource_version: where the next watch resumes (last object or BOOKMARK seen).
    """

    def __init__(
        self,
        resource: Resource,
        transport: Transport,
        timing: Timing,
        lock: threading.Lock,
        on_change: Callable[[], None],
    ) -> None:
        super().__init__(resource.name, lock, on_change)
        self.resource, self.transport, self.timing = resource, transport, timing
        self.items: dict[str, Any] = {}
        self.invalid: set[str] = set()
        self.view: Any = resource.build({})
        self.served = True
        self.path: str | None = None
        self.resource_version: str | None = None
        self.dropped = 0
        """Objects not kept since the last list: ``resource.max_per_namespace`` was reached."""
        self._bound = _Bound(resource)
        self._stream: WatchStream | None = None
        self._backoff = Backoff(timing)
        self._random = random.Random()  # noqa: S311 - spreads watch restarts, not security
        self._not_served_logged = False

    def stop(self) -> None:
        """Stop and abort the open watch, if any."""
        super().stop()
        stream = self._stream
        if stream is not None:
            stream.close()

    def forget_owner(self, owner: str) -> None:
        """Drop the values kept as ``owner``'s (``Resource.owner``): it is gone, and a tenant
        who creates and deletes pods must not pile up values no bound counts."""
        with self.lock:
            keys = self._bound.owned.get(owner)
            if not keys:
                return
            for key in list(keys):
                previous = self.items.pop(key, None)
                self._bound.release(key)
                if previous is not None and self.resource.update is not None:
                    self.view = self.resource.update(self.view, previous, None)
            if self.resource.update is None:
                self.view = self.resource.build(self.items)
            self.on_change()

    def _drop_orphans(self) -> None:
        """Drop the values a list kept as an owner's that no longer has one (caller holds
        ``lock``): the owner went while the list was paging (``forget_owner`` then saw the
        previous values, not these)."""
        find = self.resource.owner
        if find is None:
            return
        for key, owner in list(self._bound.owners.items()):
            value = self.items.get(key)
            if value is None or find(value) != owner:
                self.items.pop(key, None)
                self._bound.release(key)

    def run(self) -> None:
        """List, then watch until stopped; relist on 410, back off on errors. The first list
        waits for ``resource.waits_for``."""
        waits = self.resource.waits_for
        while waits is not None and not waits():
            if self.wait(0.05):
                return
        while not self.stopping:
            try:
                self._list()
                self._watch_until_stopped()
                return
            except NotServed:
                self._mark_not_served()
                delay = self.timing.recheck
            except Gone as exc:
                log.info("%s: %s (410 Gone); relisting", self.name, describe(exc))
                delay = self._backoff.next()
            except TransportError as exc:
                self._note_error(exc)
                delay = self._backoff.next()
            if self.wait(delay):
                return

    def _list(self) -> None:
        for path in self.resource.paths:
            collected = _Collected(self.resource)
            try:
                leftovers, version = self.transport.list(
                    path, page_size=self.timing.page_size, each=collected.take
                )
            except NotServed:
                continue
            for obj in leftovers:  # a transport that returns its items instead
                collected.take(obj)
            self.dropped = 0
            for _ in range(collected.dropped):
                self._drop("(listed)")
            self._replace(path, collected, version)
            return
        raise NotServed(", ".join(self.resource.paths))

    def _replace(self, path: str, collected: _Collected, version: str) -> None:
        items = collected.items
        with self.lock:
            previous = self.items
            self.items, self.invalid, self.served = items, collected.invalid, True
            self._bound = collected.bound
            self._drop_orphans()
            self.path, self.resource_version = path, version
            self.view = self.resource.build(items)
            self.synced, self.status = True, self._synced_status()
            self.on_change()
        if self.resource.after is not None:
            for value in items.values():
                self.resource.after(None, value)
            for key, value in previous.items():  # gone while no watch ran (a relist)
                if key not in items:
                    self.resource.after(value, None)
        self._backoff.reset()
        self._not_served_logged = False
        log.info("%s: listed %d at resourceVersion %s", self.name, len(items), version)

    def _synced_status(self) -> str:
        notes = []
        if self.path and self.path != self.resource.paths[0]:
            notes.append(self.path.rsplit("/", 2)[-2])  # the served version, e.g. v1alpha1
        if self.invalid:
            notes.append(f"{len(self.invalid)} invalid")
        if self.dropped:  # no count: a status change per dropped object would rebuild the state
            each, total = self.resource.max_per_namespace, self.resource.max_items
            bounds = [f"{each} per namespace"] if each is not None else []
            bounds += [f"{total} in all"] if total is not None else []
            notes.append(f"some not kept since the last list: at most {', '.join(bounds)}")
        return "synced" + (f" ({', '.join(notes)})" if notes else "")

    def _watch_until_stopped(self) -> None:
        while not self.stopping:
            try:
                events = self._watch_once()
            except TransportError as exc:
                self._note_error(exc)
                events = 0
            if events:
                self._backoff.reset()  # a healthy watch that ended: resume at once
            elif self.wait(self._backoff.next()):
                return

    def _watch_once(self) -> int:
        # Spread restarts over [t, 2t) like client-go, so caches do not reconnect in lockstep.
        timeout = max(1, int(self.timing.watch_timeout * (1 + self._random.random())))
        stream = self.transport.watch(
            str(self.path), resource_version=str(self.resource_version), timeout_seconds=timeout
        )
        self._stream = stream
        if self.stopping:
            stream.close()
        count = 0
        try:
            for event in stream:
                if self.stopping:
                    break
                self._apply(event)
                count += 1
        finally:
            self._stream = None
            stream.close()  # after a 410 or an error event: do not leave the response open
        if count and self.status != self._synced_status():
            self.set_status(self._synced_status())
        return count

    def _apply(self, event: RawObject) -> None:
        kind, obj = event.get("type"), event.get("object")
        if kind == "ERROR":
            status = obj if isinstance(obj, dict) else {}
            message = f"{status.get('reason')}: {status.get('message')}"
            if status.get("code") == 410:
                raise Gone(message)
            raise TransportError(f"watch error {status.get('code')} {message}")
        if kind in ("ADDED", "MODIFIED", "DELETED") and isinstance(obj, dict):
            self._apply_object(kind, obj)
        version = resource_version(obj)
        if version:
            self.resource_version = version

    def _apply_object(self, kind: str, obj: RawObject) -> None:
        key = object_key(obj)
        if key is None:
            return
        value = None if kind == "DELETED" else convert_item(self.resource, key, obj)
        with self.lock:
            status_before = self.status
            if value is INVALID:
                self.invalid.add(key)
                value = None
            else:
                self.invalid.discard(key)
            previous = self.items.get(key)
            if value is not None and previous is None:
                if not self._bound.admit(key, len(self.items), value):
                    self._drop(key)
                    value = None
            elif value is None and previous is not None:
                self._bound.release(key)
            if value is None:
                changed = self.items.pop(key, None) is not None
            else:
                changed = previous != value
                self.items[key] = value
            self.status = self._synced_status()
            if changed and self.resource.update is not None:
                self.view = self.resource.update(self.view, previous, value)
            elif changed:
                self.view = self.resource.build(self.items)
            if (changed and not self.resource.in_place) or self.status != status_before:
                self.on_change()
        if self.resource.after is not None:
            self.resource.after(previous, value)

    def _drop(self, key: str) -> None:
        """Count an object not kept past the bound (``_Bound``; logged once per list)."""
        if not self.dropped:
            log.warning(
                "%s: %s not kept: at most %s per namespace and %s in all (kept again once some "
                "are deleted)",
                self.name,
                key,
                self.resource.max_per_namespace,
                self.resource.max_items,
            )
        self.dropped += 1

    def _mark_not_served(self) -> None:
        with self.lock:
            self.items, self.invalid, self.served = {}, set(), False
            self._bound = _Bound(self.resource)
            self.path = self.resource_version = None
            self.view = self.resource.build({})
            self.synced, self.status = True, "not served"
            self.on_change()
        if not self._not_served_logged:
            log.warning(
                "%s: not served by the API server (404 on %s); treated as absent, re-checked "
                "every %.0f s",
                self.name,
                ", ".join(self.resource.paths),
                self.timing.recheck,
            )
            self._not_served_logged = True

    def _note_error(self, exc: TransportError) -> None:
        if self.stopping:
            return
        log.warning("%s: %s; retrying with backoff", self.name, describe(exc))
        prefix = "synced, retrying" if self.synced else "syncing, error"
        self.set_status(f"{prefix}: {describe(exc)}")
