"""The typed manager of cluster mode: ``start_cluster`` builds the edge and the controllers.

What controller-runtime's manager does, in one function: the caches (``api.caches``) over the
``kubernetes``-backed transport (``api.transport``), leader election (``api.leader``), the one
lease-fenced write path (``api.fence``) and the Event recorder, then every controller
(``controllers``), each attached to the caches (``/readyz`` shows its status; ``stop()`` ends
it) and told about changes through one ``CacheHooks`` value: every listener runs after the
change is in the store and the new ``ClusterState`` is published. The result is a ``Cluster``
whose fields are the typed controllers, handed explicitly to whoever needs one (the server's
metrics, tests); nothing is reached through an untyped slot.

Only the leader writes: every controller's writes go through the ``FencedTransport`` but the
webhook scope's (every replica writes it, the patch tests what it read:
docs/operations/webhook-scope.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from webhook.admission.engine import Engine
from webhook.base.config import Settings
from webhook.cluster.api import heap
from webhook.cluster.api.caches import ClusterSource, timing_from
from webhook.cluster.api.client import api_client
from webhook.cluster.api.events import EventRecorder
from webhook.cluster.api.fence import FencedTransport
from webhook.cluster.api.hooks import CacheHooks
from webhook.cluster.api.leader import LeaderElector, new_identity
from webhook.cluster.api.transport import KubeTransport
from webhook.cluster.controllers.audit.worker import AuditWorker
from webhook.cluster.controllers.base import Reconciler
from webhook.cluster.controllers.checkpoints import CheckpointReporter
from webhook.cluster.controllers.config_watch import ConfigWatch
from webhook.cluster.controllers.origins.recorder import OriginRecorder
from webhook.cluster.controllers.restores.tracker import RestoreTracker
from webhook.cluster.controllers.scope import ScopeController
from webhook.cluster.controllers.snapshot_lifecycle import LifecycleWorker
from webhook.cluster.controllers.snapshot_warnings import SnapshotWarnings
from webhook.kube.custom_views import workloads_from
from webhook.snapshots.state import ClusterState

log = logging.getLogger("snapready.kube")


@dataclass(frozen=True)
class Cluster:
    """A started cluster mode: the caches, the write path and every controller, typed.

    Attributes:
        source: the caches and the ``ClusterState`` they publish.
        elector: leader election (None with ``leader.enabled`` off: this replica always leads).
        fence: the lease-fenced transport every leader-only write goes through.
        events: the leader's Event recorder (through ``fence``).
        scope, origins, restores, checkpoints, warnings, lifecycle, audit: the controllers.
        configs: the Secret/ConfigMap metadata watch (None with ``origin.record_config`` off).
    """

    source: ClusterSource
    elector: LeaderElector | None
    fence: FencedTransport
    events: EventRecorder
    scope: ScopeController
    origins: OriginRecorder
    restores: RestoreTracker
    checkpoints: CheckpointReporter
    warnings: SnapshotWarnings
    lifecycle: LifecycleWorker
    audit: AuditWorker
    configs: ConfigWatch | None = None

    @property
    def controllers(self) -> tuple[Reconciler, ...]:
        """Every controller, in the order they were built."""
        watch = () if self.configs is None else (self.configs,)
        return (
            self.scope,
            self.origins,
            *watch,
            self.restores,
            self.checkpoints,
            self.warnings,
            self.lifecycle,
            self.audit,
        )

    def state(self) -> ClusterState:
        """The current ``ClusterState`` (``ClusterSource.state``: never blocks)."""
        return self.source.state()

    def synced(self) -> bool:
        """Whether every cache and readiness-gating controller has synced once."""
        return self.source.synced()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop the caches and every controller; True when every thread ended in ``timeout`` s."""
        return self.source.stop(timeout)


def _leading(cluster: Cluster) -> None:
    """This replica just became leader: every controller but the config watch looks at once."""
    for controller in cluster.controllers:
        if controller is not cluster.configs:
            controller.notify()


def _hooks(cluster: Cluster, *, tune_heap: bool) -> CacheHooks:
    """Who hears what: policies wake the scope and the audit; snapshots and nodes the writers of
    records, outcomes, checkpoints, warnings and the lifecycle (and the config watch); GKE's
    Events and stamped pods the outcomes and the lifecycle; every pod the outcomes, the audit
    and the lifecycle's ``PodUses`` (after the store update)."""
    restores, audit, configs = cluster.restores, cluster.audit, cluster.configs
    snapshots = [
        cluster.origins.notify,
        restores.notify,
        cluster.checkpoints.notify,
        cluster.warnings.notify,
        cluster.lifecycle.notify,
    ]
    if configs is not None:
        snapshots.insert(0, configs.notify)
    return CacheHooks(
        policies=(cluster.scope.notify, audit.notify),
        snapshots=tuple(snapshots),
        evidence=(restores.notify, cluster.lifecycle.notify),
        pods=(cluster.lifecycle.pod_uses.changed, restores.observe, audit.observe),
        pods_gone=(cluster.lifecycle.pod_uses.changed, restores.gone, audit.gone),
        synced=(heap.end_sync,) if tune_heap else (),
        configs=configs.view if configs is not None else None,
        scope_in_sync=lambda: cluster.scope.in_sync,
    )


def _leader_writers(
    source: ClusterSource,
    writes: FencedTransport,
    events: EventRecorder,
    settings: Settings,
    *,
    is_leader: Callable[[], bool],
    metadata: KubeTransport | None,
) -> tuple[OriginRecorder, RestoreTracker, CheckpointReporter, SnapshotWarnings, LifecycleWorker]:
    """The controllers that write only as leader, each through the fence (``metadata``: the
    metadata-only reads of consumed configuration, or None)."""
    state, lock, rebuild = source.state, source.lock, source.rebuild
    mine = settings.outcomes.tracks
    origins = OriginRecorder(
        writes,
        snapshot_api=lambda: source.served_api("podsnapshots"),
        records_served=lambda: source.served_api("snapshotrecords") is not None,
        is_leader=is_leader,
        prefix=settings.prefix,
        metadata=metadata,
        mine=mine,
        state=state,
        lock=lock,
        on_change=rebuild,
    )
    restores = RestoreTracker(
        events,
        is_leader=is_leader,
        settings=settings,
        pods=writes,
        state=state,
        lock=lock,
        on_change=rebuild,
    )
    checkpoints = CheckpointReporter(
        events,
        is_leader=is_leader,
        stall_seconds=settings.checkpoint.stall_seconds,
        catch_up_seconds=settings.outcomes.catch_up_seconds,
        mine=mine,
        state=state,
        lock=lock,
        on_change=rebuild,
    )
    warnings = SnapshotWarnings(
        events,
        is_leader=is_leader,
        deletion_stuck_seconds=settings.restore.deletion_stuck_seconds,
        mine=mine,
        state=state,
        lock=lock,
        on_change=rebuild,
    )
    lifecycle = LifecycleWorker(
        writes,
        events,
        snapshot_api=lambda: source.served_api("podsnapshots"),
        is_leader=is_leader,
        settings=settings,
        state=state,
        lock=lock,
        on_change=rebuild,
    )
    return origins, restores, checkpoints, warnings, lifecycle


def build_cluster(
    settings: Settings, client: Any, transport: KubeTransport, source: ClusterSource
) -> Cluster:
    """Every controller of cluster mode over ``source`` (not started), typed in a ``Cluster``.

    Args:
        settings: all settings; ``client``: the ``kubernetes`` ``ApiClient`` (leader
            election); ``transport``: the API transport over it (reads, and the writes the
            fence lets through); ``source``: the caches the controllers read (their lock and
            rebuild publish each controller's ``/readyz`` status).

    Nothing is started and nothing is requested from the API server here: ``start_cluster``
    attaches the result to ``source`` and starts it.
    """
    elector: LeaderElector | None = None
    if settings.leader.enabled:
        elector = LeaderElector(client, settings.leader, lock=source.lock, on_change=source.rebuild)
    is_leader = (lambda: elector.is_leader) if elector is not None else (lambda: True)
    # Every write below goes through the fence: none leaves without a provably held Lease.
    writes = FencedTransport(transport, is_leader)
    events = EventRecorder(writes, elector.identity if elector is not None else new_identity())
    scope = ScopeController(
        # Every replica writes the scope (the patch tests what it read;
        # docs/operations/webhook-scope.md): not lease-fenced, so a policy is covered within seconds
        # even while nobody leads.
        transport,
        settings.scope,
        custom=tuple((w.group, w.resource) for w in workloads_from(settings).values()),
        prefix=settings.prefix,
        policies=source.synced_policies,
        is_leader=lambda: True,
        lock=source.lock,
        on_change=source.rebuild,
    )
    # Secrets and ConfigMaps: metadata only, never their values; none with record_config off.
    metadata = transport.metadata_only() if settings.origin.record_config else None
    configs = None
    if metadata is not None:
        configs = ConfigWatch(
            metadata,
            state=source.state,
            timing=timing_from(settings.source),
            lock=source.lock,
            on_change=source.rebuild,
            mine=settings.outcomes.tracks,
        )
    origins, restores, checkpoints, warnings, lifecycle = _leader_writers(
        source, writes, events, settings, is_leader=is_leader, metadata=metadata
    )
    audit = AuditWorker(
        writes,
        transport,
        Engine(settings=settings, state=source.state),  # admission's own rules (no governance)
        settings,
        state=source.state,
        is_leader=is_leader,
        lock=source.lock,
        on_change=source.rebuild,
        timing=timing_from(settings.source),
    )
    return Cluster(
        source, elector, writes, events, scope, origins, restores, checkpoints, warnings,
        lifecycle, audit, configs,
    )  # fmt: skip


def start_cluster(settings: Settings, *, tune_heap: bool = False) -> Cluster:
    """A started ``Cluster`` reading the API server named by the settings.

    Returns at once; ``state().synced`` turns True when every cache has listed once. With
    ``tune_heap`` (``snapready serve`` only: it changes the process-wide garbage collector), the
    first sync runs under ``heap.begin_sync`` and ends with ``heap.end_sync``.

    Raises:
        ConfigError: the client configuration cannot be loaded (see ``api_client``).
    """
    client = api_client(settings)
    transport = KubeTransport(client, settings.source.request_timeout_seconds)
    source = ClusterSource(
        transport,
        prefix=settings.prefix,
        timing=timing_from(settings.source),
        on_stop=client.close,
    )
    cluster = build_cluster(settings, client, transport, source)
    if cluster.elector is not None:
        source.attach(cluster.elector)
        cluster.elector.on_leading = partial(_leading, cluster)
    for controller in cluster.controllers:
        source.attach(controller)
    log.info("cluster mode: watching the API server at %s", client.configuration.host)
    if tune_heap:
        heap.begin_sync()
    source.start(_hooks(cluster, tune_heap=tune_heap))
    return cluster
