"""Leader election on a ``coordination.k8s.io/v1`` Lease: only one replica writes to the cluster.

Wraps the ``kubernetes`` client's ``leaderelection`` (the port of client-go's): ``LeaderElector``
is a background worker whose ``is_leader`` is true while this process holds the Lease. It adds
what the library lacks for a server: a stop that ends the loops within one retry period, a
release of the Lease on a graceful stop (``holderIdentity`` cleared, so the next replica takes
over at once instead of after ``lease_duration``, like controller-runtime's
``LeaderElectionReleaseOnCancel``), and re-entering the election after leadership is lost.
``is_leader`` is fenced by time (``cluster.api.fence``, docs/operations/leader-election.md): true
only while the monotonic time since the start of the last successful acquire/renew is below
``renew_deadline_seconds``, so a process that wakes from a freeze is not leader until it has
renewed, whatever the library's state says. Writers check it immediately before each write
(``FencedTransport``).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client as kube_client
from kubernetes.leaderelection import electionconfig
from kubernetes.leaderelection.leaderelection import LeaderElection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from webhook.base.config import LeaderSettings
from webhook.cluster.api.syncing import Worker, describe

log = logging.getLogger("snapready.leader")
# The library logs every acquire/renew attempt at INFO (every retry period, per replica).
logging.getLogger("leaderelection").setLevel(logging.WARNING)
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def lease_namespace(settings: LeaderSettings) -> str:
    """The Lease's namespace: the setting, else ``$POD_NAMESPACE`` (downward API), else the
    in-cluster service account's namespace file, else ``default``."""
    if settings.lease_namespace:
        return settings.lease_namespace
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def new_identity() -> str:
    """``<hostname>_<uuid4>``: unique per process, readable in ``kubectl get lease``."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class _Election(LeaderElection):
    """The library's election with loops that end when ``stopping`` is set."""

    def __init__(
        self, config: Any, stopping: threading.Event, renewed: Callable[[float], None]
    ) -> None:
        super().__init__(config)  # type: ignore[no-untyped-call]
        self._stopping = stopping
        self._renewed = renewed
        self._renewed_at: float | None = None

    def try_acquire_or_renew(self) -> bool:
        """The library's attempt; a success reports when it started (monotonic seconds): the
        Lease is held from no later than that instant."""
        started = _now()
        ok = bool(super().try_acquire_or_renew())  # type: ignore[no-untyped-call]
        if ok:
            self._renewed_at = started
            self._renewed(started)
        return ok

    def acquire(self) -> bool:
        while not self._stopping.is_set():
            if self.try_acquire_or_renew():
                return True
            self._stopping.wait(self.election_config.retry_period)
        return False

    def renew_loop(self, leading_failed: threading.Event | None = None) -> None:
        retry = self.election_config.retry_period
        deadline = self.election_config.renew_deadline
        while not self._stopping.is_set():
            if leading_failed is not None and leading_failed.is_set():
                return
            renewed = False
            # client-go's deadline runs from the last successful renew, not from this attempt:
            # a process woken from a freeze past it steps down at once instead of retrying.
            attempt_until = (self._renewed_at or _now()) + deadline
            while _now() < attempt_until and not self._stopping.is_set():
                if self.try_acquire_or_renew():
                    renewed = True
                    break
                self._stopping.wait(retry)
            if not renewed:
                return
            self._stopping.wait(retry)


def _now() -> float:
    import time  # noqa: PLC0415 - local: the module is import-light

    return time.monotonic()


class LeaderElector(Worker):
    """Keeps trying to hold the Lease; ``is_leader`` says whether this process holds it now.

    Args:
        api_client: the ``kubernetes`` ApiClient (the library's LeaseLock would otherwise use
            the global default client).
        settings: lease name, namespace and timings (client-go defaults 15/10/2 s).
        on_change: called (under ``lock``) when leadership or status changes.
        on_leading: called (no lock held) right after this process became leader.
    """

    def __init__(
        self,
        api_client: Any,
        settings: LeaderSettings,
        *,
        lock: threading.Lock,
        on_change: Callable[[], None],
        on_leading: Callable[[], None] | None = None,
        identity: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__("leader", lock, on_change)
        self.clock = clock or _now
        self._renewed_at: float | None = None
        self.api_client = api_client
        self.settings = settings
        self.namespace = lease_namespace(settings)
        self.identity = identity or new_identity()
        self.on_leading = on_leading
        self._leader = threading.Event()

    @property
    def lease(self) -> str:
        """The Lease name."""
        return self.settings.lease_name

    @property
    def is_leader(self) -> bool:
        """True while this process provably holds the Lease: elected, and less than
        ``renew_deadline_seconds`` (monotonic) since its last successful renew began."""
        renewed = self._renewed_at
        if not self._leader.is_set() or renewed is None:
            return False
        return self.clock() - renewed < self.settings.renew_deadline_seconds

    def renewed(self, started: float) -> None:
        """A renew (or the acquire) that began at monotonic ``started`` succeeded."""
        self._renewed_at = started

    def run(self) -> None:
        """Elect, lead until the lease is lost or ``stop()``, then try again."""
        self.set_status("follower", synced=True)
        while not self.stopping:
            lock = LeaseLock(  # type: ignore[no-untyped-call]
                self.settings.lease_name, self.namespace, self.identity
            )
            lock.api_instance = kube_client.CoordinationV1Api(self.api_client)
            config = electionconfig.Config(  # type: ignore[no-untyped-call]
                lock,
                self.settings.lease_duration_seconds,
                self.settings.renew_deadline_seconds,
                self.settings.retry_period_seconds,
                onstarted_leading=self._started,
                onstopped_leading=self._stopped,
            )
            try:
                _Election(config, self._stopping, self.renewed).run()  # type: ignore[no-untyped-call]
            except Exception as exc:  # a network error inside the library's renew loop
                log.warning("leader election: %s", describe(exc))
            finally:
                self._stopped()
            self.wait(self.settings.retry_period_seconds)
        self._release()

    def _started(self) -> None:
        self._leader.set()
        log.info("leader: %s holds lease %s/%s", self.identity, self.namespace, self.lease)
        self.set_status("leader")
        if self.on_leading is not None:
            self.on_leading()

    def _stopped(self) -> None:
        self._renewed_at = None
        if self._leader.is_set():
            self._leader.clear()
            level = logging.INFO if self.stopping else logging.WARNING
            log.log(level, "leader: %s left lease %s/%s", self.identity, self.namespace, self.lease)
        self.set_status("follower")

    def _release(self) -> None:
        """Give the Lease up on a graceful stop if this process still holds it."""
        api = kube_client.CoordinationV1Api(self.api_client)
        try:
            lease = api.read_namespaced_lease(self.settings.lease_name, self.namespace)
            if lease.spec is not None and lease.spec.holder_identity == self.identity:
                api.patch_namespaced_lease(
                    self.settings.lease_name,
                    self.namespace,
                    {"spec": {"holderIdentity": None, "leaseDurationSeconds": 1}},
                )
                log.info("leader: released lease %s/%s", self.namespace, self.lease)
        except Exception as exc:  # best effort: the lease expires by itself
            log.info("leader: lease not released: %s", describe(exc))
