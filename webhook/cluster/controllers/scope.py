"""The webhook-scope controller: keeps the ``snapready-scope`` matchCondition of snapready's own
webhook configurations equal to what the current PodSnapshotPolicies can select.

The condition itself is built in ``webhook.kube.scope`` (pure). Here: every replica compares the
live Mutating/ValidatingWebhookConfigurations with the scope its caches imply and, once its
policy cache has synced, writes it (docs/operations/webhook-scope.md: a new policy must not wait for
a new leader, up to a lease duration after the leader died; one JSON Patch per configuration, with a
``test`` of each webhook's name and of the resourceVersion it read, so concurrent writers fail and
re-read instead of losing an update, and only when the result changes). ``is_leader`` (the manager
passes "always") can still restrict writing to one replica. A policy change wakes the controller at
once; a periodic recheck repairs hand edits. Readiness: the controller is ``synced`` once the
live configurations carried the desired scope (written by this replica or another), so
``/readyz`` turns true only after the first reconcile. A failed write keeps the last written
conditions (never widens or narrows by accident), is logged and shows in the status (and the
``snapready_webhook_scope_synced`` gauge, through ``in_sync``).
Static mode removes a leftover ``snapready-scope`` condition and is synced at once otherwise.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from webhook.base.config import ScopeSettings
from webhook.base.types import RawObject
from webhook.cluster.api.syncing import NotServed, TransportError, describe
from webhook.cluster.controllers.base import Reconciler
from webhook.kube.matching import PolicyIndex
from webhook.kube.scope import (
    CONDITION_NAME,
    CUSTOM_RESOURCES,
    DEFAULT_PREFIX,
    Scope,
    build_scope,
)

log = logging.getLogger("snapready.scope")
FIRST_SYNC_RETRY = 2.0
"""Seconds before the first retry while the scope is not in sync; doubled per failed pass."""
MAX_RETRY = 8.0
"""Longest wait between retries while not in sync (a fresh ``helm install`` creates the
configurations after the Deployment: readiness then follows within seconds)."""
WRITE_ATTEMPTS = 3
"""Reads and patches of one configuration per pass when a concurrent writer fails our ``test``."""
API = "/apis/admissionregistration.k8s.io/v1"
KINDS = {
    "mutatingwebhookconfigurations": "MutatingWebhookConfiguration",
    "validatingwebhookconfigurations": "ValidatingWebhookConfiguration",
}


class ScopeTransport(Protocol):
    """What the controller needs from the API: a GET and a JSON Patch (RFC 6902)."""

    def get(self, path: str) -> RawObject: ...

    def patch(self, path: str, ops: Sequence[RawObject]) -> RawObject: ...


def desired_conditions(current: Any, scope: Scope) -> list[RawObject]:
    """A webhook's ``matchConditions`` with ours replaced by ``scope`` (others kept, in order)."""
    others = [c for c in (current or []) if isinstance(c, dict) and c.get("name") != CONDITION_NAME]
    return [*others, *scope.conditions]


def scope_patch(configuration: RawObject, scope: Scope) -> list[RawObject]:
    """The JSON Patch that gives every webhook of ``configuration`` the scope; ``[]`` if none.

    Each change is guarded by a ``test`` of the webhook's name at that index, so a concurrent
    reordering (a ``helm upgrade``) fails the patch instead of editing the wrong webhook, and by
    a ``test`` of the ``resourceVersion`` it read, so of two replicas writing at once one fails
    and re-reads instead of overwriting what the other wrote (every replica writes:
    docs/operations/leader-election.md).
    """
    ops: list[RawObject] = []
    for index, webhook in enumerate(configuration.get("webhooks") or []):
        if not isinstance(webhook, dict):
            continue
        current = webhook.get("matchConditions")
        wanted = desired_conditions(current, scope)
        if (current or []) == wanted:
            continue
        ops.append({"op": "test", "path": f"/webhooks/{index}/name", "value": webhook.get("name")})
        if wanted:
            ops.append({"op": "add", "path": f"/webhooks/{index}/matchConditions", "value": wanted})
        else:
            ops.append({"op": "remove", "path": f"/webhooks/{index}/matchConditions"})
    metadata = configuration.get("metadata")
    version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    if ops and isinstance(version, str):
        # Every replica writes: a configuration changed since we read it fails the patch (the
        # resourceVersion, not the conditions: the server's ``test`` compares JSON text, and it
        # serves ``&&`` in CEL as ``\u0026\u0026``).
        ops.insert(0, {"op": "test", "path": "/metadata/resourceVersion", "value": version})
    return ops


class ScopeController(Reconciler):
    """Reconciles the scope of the two configurations named in ``settings``.

    Args:
        transport: GET/PATCH to the API server (``KubeTransport``).
        settings: mode, configuration names, expression bound, recheck period.
        custom: (group, resource) of the custom workloads (``kube.scope.CUSTOM_RESOURCES``
            plus ``workloads.extra``), sent in namespaces that have a policy.
        prefix: ``Settings.prefix``: a pod carrying a key snapready owns is always sent
            (``kube.scope.owned_keys_cel``).
        policies: the current policy index, or None while the policy cache has not synced
            (nothing is written before the policies are known: that could narrow the scope).
        is_leader: whether this replica may write now.
    """

    first_delay = 0.0
    initial_status = None  # ``synced`` follows the first reconcile (readiness waits for it)

    def __init__(
        self,
        transport: ScopeTransport,
        settings: ScopeSettings,
        *,
        custom: tuple[tuple[str, str], ...] = CUSTOM_RESOURCES,
        prefix: str = DEFAULT_PREFIX,
        policies: Callable[[], PolicyIndex | None],
        is_leader: Callable[[], bool],
        lock: threading.Lock,
        on_change: Callable[[], None],
    ) -> None:
        super().__init__("webhookScope", lock, on_change, period=settings.recheck_seconds)
        self.transport, self.settings = transport, settings
        self.custom, self.prefix = custom, prefix
        self.policies, self.is_leader = policies, is_leader
        self.in_sync = False
        self.level = "none"
        self._retry = FIRST_SYNC_RETRY
        self._last_error: str | None = None

    def notify(self) -> None:
        """Reconcile soon (a policy changed, or leadership was gained); a wake-up starts the
        retry delay again at 2 s."""
        self._retry = FIRST_SYNC_RETRY
        super().notify()

    def reconcile(self) -> float:
        """One pass; then ``recheck_seconds`` while in sync, else a retry after 2 s doubling up
        to ``MAX_RETRY`` (a ``notify`` starts again at 2 s)."""
        self.sync()
        if self.in_sync:
            self._retry = FIRST_SYNC_RETRY
            return self.settings.recheck_seconds
        wait, self._retry = self._retry, min(2 * self._retry, MAX_RETRY)
        return wait

    def sync(self) -> None:
        """One pass: compute, compare, write if leader; status says what happened."""
        index = self.policies()
        if index is None:
            self._report(False, "waiting for the policy cache")
            return
        if self.settings.mode == "dynamic":
            scope = build_scope(
                index.all(),
                max_chars=self.settings.max_expression_chars,
                custom=self.custom,
                prefix=self.prefix,
            )
        else:
            scope = Scope("everything", ())
        self.level = scope.level
        try:
            pending = self._apply(scope)
        except NotServed as exc:
            if self.settings.mode == "static":  # nothing to clean up, nothing to gate
                self._report(False, f"static (no configuration: {describe(exc)})")
                self.set_status(self.status, synced=True)
                return
            self._warn(f"webhook scope not reconciled: {describe(exc)}")
            self._report(False, f"error, configuration missing: {describe(exc)}")
            return
        except TransportError as exc:
            self._warn(f"webhook scope not reconciled (last conditions kept): {describe(exc)}")
            # Static scope gates nothing (today's behaviour): only dynamic waits for a write.
            self._report(False, f"error, last written scope kept: {describe(exc)}")
            if self.settings.mode == "static":
                self.set_status(self.status, synced=True)
            return
        if self._last_error is not None:
            log.info("webhook scope reconciled again")
            self._last_error = None
        if pending:
            self._report(False, "waiting for the leader to write the scope")
        else:
            count = len(index)
            noun = "policy" if count == 1 else "policies"
            self._report(True, f"synced ({scope.level}, {count} {noun})")

    def _apply(self, scope: Scope) -> bool:
        """Patch (as leader) or compare (as follower); True while some configuration differs."""
        pending = False
        for resource, name in (
            ("mutatingwebhookconfigurations", self.settings.mutating_configuration),
            ("validatingwebhookconfigurations", self.settings.validating_configuration),
        ):
            path = f"{API}/{resource}/{name}"
            for attempt in range(WRITE_ATTEMPTS):
                ops = scope_patch(self.transport.get(path), scope)
                if not ops:
                    break
                if not self.is_leader():
                    pending = True
                    break
                try:
                    self.transport.patch(path, ops)
                except TransportError:  # a failed ``test``: another replica wrote; read again
                    if attempt + 1 == WRITE_ATTEMPTS:
                        raise
                    continue
                log.info("webhook scope written to %s %s (%s)", KINDS[resource], name, scope.level)
                break
        return pending

    def _warn(self, message: str) -> None:
        """Log a failed pass: a warning when the error is new, debug while it repeats."""
        if message != self._last_error:
            log.warning("%s", message)
        else:
            log.debug("%s (still)", message)
        self._last_error = message

    def _report(self, in_sync: bool, status: str) -> None:
        self.in_sync = in_sync
        # Readiness waits for the first reconcile only; afterwards errors show in the status.
        self.set_status(status, synced=self.synced or in_sync)
