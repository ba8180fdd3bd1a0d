"""A pending pod that left the pod cache: deleted, or its ``<prefix>selected`` label was removed.

The pod cache watches only ``<prefix>selected=true`` (``watched.stamped_pods``), so a
pod whose label a user removed looks exactly like a deleted one: the watch reports it DELETED.
Its outcome used to be silently dropped then. Now the tracker asks the ``LabelGuard``
(leader only, writes fenced like every other write) before it forgets a pending pod:

- the pod is gone (404, or a newer pod of the same name: another uid): forget it;
- it exists, lost the label, and a live PodSnapshotPolicy still selects it by its labels
  (``snapshots.selection``): the label is written back (JSON merge patch with the uid as a
  precondition, field manager ``snapready``), a warning is logged, and the pod stays pending: it
  re-enters the cache and gets its outcome as if nothing had happened;
- it exists but no live policy selects it any more: forget it (not snapready's to report);
- it still carries the label (the cache is behind) or the API failed: keep it pending and look
  again on the next pass, at most ``MAX_LOOKS`` times per pod (then forget it, logged).

The ownership webhook (rule ``owned-metadata``, docs/security.md) denies such label changes by
anyone but snapready's service account where it is installed; this is the repair where it is not.
"""

from __future__ import annotations

import logging
from typing import Protocol
from urllib.parse import quote

from webhook.base.keys import SELECTED
from webhook.base.types import RawObject
from webhook.cluster.api.stamped_pods import pod_record
from webhook.cluster.api.syncing import NotServed, TransportError, describe
from webhook.kube.matching import PolicyIndex
from webhook.snapshots.selection import selecting_policies

log = logging.getLogger("snapready.restores")
MAX_LOOKS = 5
"""GETs of one vanished pod before the tracker gives up on it (the cache normally catches up
within one pass; a pod that keeps failing must not cost a GET every 0.2 s for ever)."""


class LabelTransport(Protocol):
    """A GET and a JSON merge patch (RFC 7386) with a field manager."""

    def get(self, path: str) -> RawObject: ...

    def merge_patch(self, path: str, patch: RawObject, *, field_manager: str) -> RawObject: ...


class LabelGuard:
    """Tells a deleted pending pod from one that lost its label, and relabels the latter.

    Args:
        transport: GET and merge-patch pods (a lease-fenced transport in cluster mode).
        prefix: label and annotation prefix (``snapready.io/``).
    """

    def __init__(self, transport: LabelTransport | None, prefix: str) -> None:
        self.transport, self.prefix = transport, prefix
        self.relabelled = 0
        self._looks: dict[str, int] = {}

    def lost(self, key: str, uid: str, policies: PolicyIndex) -> bool:
        """Whether ``key`` (``namespace/name``, last seen with ``uid``) should stay pending."""
        if self.transport is None:
            return False
        looks = self._looks.get(key, 0) + 1
        if looks > MAX_LOOKS:
            self._looks.pop(key, None)
            log.warning("pod %s left the pod cache and did not come back: outcome not tracked", key)
            return False
        self._looks[key] = looks
        namespace, _, name = key.partition("/")
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
        try:
            pod = self.transport.get(path)
        except NotServed:  # 404: deleted
            self._looks.pop(key, None)
            return False
        except TransportError as exc:
            log.info("pod %s left the pod cache; not looked up: %s", key, describe(exc))
            return True
        record = pod_record(pod, self.prefix)
        if record is None or (uid and record.uid != uid):  # a newer pod of the same name
            self._looks.pop(key, None)
            return False
        if record.labels.get(self.prefix + SELECTED) == "true":
            return True  # the cache is behind
        if selecting_policies(record, policies) is None:
            self._looks.pop(key, None)
            log.info("pod %s lost its label and no policy selects it: outcome not tracked", key)
            return False
        return self._relabel(key, path, record.uid)

    def forget(self, key: str) -> None:
        """The pod is back in the cache (or decided): reset its look-up count."""
        self._looks.pop(key, None)

    def _relabel(self, key: str, path: str, uid: str) -> bool:
        assert self.transport is not None
        metadata: RawObject = {"labels": {self.prefix + SELECTED: "true"}}
        if uid:
            metadata["uid"] = uid  # precondition: never a newer pod of the same name
        try:
            self.transport.merge_patch(path, {"metadata": metadata}, field_manager="snapready")
        except (TransportError, NotServed) as exc:
            log.warning("pod %s lost its selected label; not relabelled: %s", key, describe(exc))
            return True
        self.relabelled += 1
        log.warning(
            "pod %s lost its label %sselected although policy selects it: label written back",
            key,
            self.prefix,
        )
        return True
