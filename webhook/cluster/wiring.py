"""``open_cluster_source``: cluster mode assembled from its parts.

The caches (``caches.ClusterSource``) over the ``kubernetes``-backed transport (``client``), plus
the controllers that write (leader election, webhook scope, origin records, restore outcomes and
events, the snapshot lifecycle, the audit and its policy reports; every write through one
lease-fenced ``FencedTransport``), each attached to the source so that ``/readyz`` shows their
status and ``stop()`` ends them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from webhook.admission.engine import Engine
from webhook.base.config import Settings
from webhook.cluster import heap
from webhook.cluster.audit import AuditWorker
from webhook.cluster.caches import ClusterSource, timing_from
from webhook.cluster.client import KubeTransport, api_client
from webhook.cluster.config_watch import ConfigWatch
from webhook.cluster.events import EventRecorder
from webhook.cluster.fence import FencedTransport
from webhook.cluster.leader import LeaderElector, new_identity
from webhook.cluster.lifecycle import LifecycleWorker
from webhook.cluster.origins import OriginRecorder
from webhook.cluster.restores import RestoreTracker
from webhook.cluster.scope import ScopeController
from webhook.kube.custom_views import workloads_from

log = logging.getLogger("snapready.kube")


def _watch_configs(source: ClusterSource, metadata: KubeTransport, settings: Settings) -> None:
    """Attach the metadata-only Secret/ConfigMap watch (``cluster.config_watch``)."""
    configs = ConfigWatch(
        metadata,
        state=source.state,
        timing=timing_from(settings.source),
        lock=source.lock,
        on_change=source.rebuild,
        mine=settings.outcomes.tracks,
    )
    source.attach(configs)
    source.configs = configs
    source.on_snapshots.append(configs.notify)


def _audit(
    source: ClusterSource,
    writes: FencedTransport,
    reads: KubeTransport,
    settings: Settings,
    is_leader: Callable[[], bool],
) -> AuditWorker:
    """Attach the audit and its policy reports (``cluster.audit``, leader only)."""
    audit = AuditWorker(
        writes,
        reads,
        Engine(settings=settings, state=source.state),  # admission's own rules (no governance)
        settings,
        state=source.state,
        is_leader=is_leader,
        lock=source.lock,
        on_change=source.rebuild,
        timing=timing_from(settings.source),
    )
    source.attach(audit)
    source.audit = audit
    source.pod_listeners.append(audit.observe)
    source.pods_gone.append(audit.gone)
    source.on_policies.append(audit.policies_changed)
    return audit


def open_cluster_source(settings: Settings, *, tune_heap: bool = False) -> ClusterSource:
    """A started ``ClusterSource`` reading the API server named by the settings.

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
    elector: LeaderElector | None = None
    if settings.leader.enabled:
        elector = LeaderElector(client, settings.leader, lock=source.lock, on_change=source.rebuild)
        source.attach(elector)
    is_leader = (lambda: elector.is_leader) if elector is not None else (lambda: True)
    # Every write below goes through the fence: none leaves without a provably held Lease.
    writes = FencedTransport(transport, is_leader)
    source.fence = writes
    scope = ScopeController(
        # Every replica writes the scope (the patch tests what it read; issue 27 deliverable 5):
        # not lease-fenced, so a policy is covered within seconds even while nobody leads.
        transport,
        settings.scope,
        custom=tuple((w.group, w.resource) for w in workloads_from(settings).values()),
        policies=source.synced_policies,
        is_leader=lambda: True,
        lock=source.lock,
        on_change=source.rebuild,
    )
    source.attach(scope)
    source.scope = scope
    source.on_policies.append(scope.notify)
    events = EventRecorder(writes, elector.identity if elector is not None else new_identity())
    # Secrets and ConfigMaps: metadata only, never their values; none with record_config off.
    metadata = transport.metadata_only() if settings.origin.record_config else None
    recorder = OriginRecorder(
        writes,
        state=source.state,
        snapshot_api=lambda: source.served_api("podsnapshots"),
        records_served=lambda: source.served_api("snapshotrecords") is not None,
        is_leader=is_leader,
        prefix=settings.prefix,
        lock=source.lock,
        on_change=source.rebuild,
        metadata=metadata,
        mine=settings.outcomes.tracks,
    )
    source.attach(recorder)
    source.origins = recorder
    source.on_snapshots.append(recorder.notify)
    if metadata is not None:
        _watch_configs(source, metadata, settings)
    tracker = RestoreTracker(
        events,
        state=source.state,
        is_leader=is_leader,
        lock=source.lock,
        on_change=source.rebuild,
        settings=settings,
        pods=writes,
    )
    source.attach(tracker)
    source.pod_listeners.append(tracker.observe)
    source.pods_gone.append(tracker.gone)
    source.on_snapshots.append(tracker.notify)
    source.on_evidence.append(tracker.notify)
    source.restores = tracker
    lifecycle = LifecycleWorker(
        writes,
        events,
        state=source.state,
        snapshot_api=lambda: source.served_api("podsnapshots"),
        is_leader=is_leader,
        lock=source.lock,
        on_change=source.rebuild,
        settings=settings,
    )
    source.attach(lifecycle)
    source.on_snapshots.append(lifecycle.notify)
    source.on_evidence.append(lifecycle.notify)
    source.lifecycle = lifecycle
    audit = _audit(source, writes, transport, settings, is_leader)
    if elector is not None:

        def on_leading() -> None:
            scope.notify()
            recorder.notify()
            tracker.notify()
            lifecycle.notify()
            audit.notify()

        elector.on_leading = on_leading
    log.info("cluster mode: watching the API server at %s", client.configuration.host)
    if tune_heap:
        heap.begin_sync()
        source.on_synced.append(heap.end_sync)
    source.start()
    return source
