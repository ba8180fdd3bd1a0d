"""Scrape-time collectors: series computed from the current ``ClusterState`` when Prometheus
scrapes (cache statuses and PodSnapshots by state), so nothing is updated on the request path."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from webhook.snapshots.outcomes import snapshot_state
from webhook.snapshots.records import RECORD_ACTIONS
from webhook.snapshots.selection import bounded_labels
from webhook.snapshots.state import ClusterState

NOT_SERVED = "not served"
"""Status prefix the cluster caches use for an API the cluster does not serve (a 404 on list)."""


SOURCE_DETAIL_KEYS = frozenset(
    {
        "source",
        "policies",
        "gkeVersion",
        "leader",
        "webhookScope",
        "originRecords",
        "restoreOutcomes",
        "configWatch",
        "lifecycle",
        "reports",
    }
)
"""``ClusterState.details`` keys that are facts, not per-resource cache statuses."""


class SourceApiCollector:
    """``snapready_source_api_served{resource}``: 1 when the cluster serves the API a cache
    watches, 0 when it answered 404 (CRD not installed, ComputeClass API absent). Read from
    ``ClusterState.details`` at scrape time; the file source has no such series."""

    def __init__(self, state: Callable[[], ClusterState]) -> None:
        self.state = state

    def collect(self) -> Iterable[GaugeMetricFamily]:
        """One gauge sample per cache of the current state (none for the file source)."""
        details = self.state().details
        if details.get("source") != "kube":
            return
        family = GaugeMetricFamily(
            "snapready_source_api_served",
            "1 when the API a cluster cache watches is served, 0 when it is not installed.",
            labels=["resource"],
        )
        for resource, status in sorted(details.items()):
            if resource not in SOURCE_DETAIL_KEYS and isinstance(status, str):
                family.add_metric([resource], 0.0 if status.startswith(NOT_SERVED) else 1.0)
        yield family


class SnapshotCollector:
    """``snapready_snapshots{namespace,policy,state}``: PodSnapshots by state (``prunable``: no
    pod can restore from it, ``snapshots.prune``, counted there only; ``ready``, ``stale``,
    ``stale-config``, ``awaiting`` (checkpoint uploading), ``failed`` (checkpoint failed),
    ``not_ready``; ``snapshots.outcomes.snapshot_state``), read from the cache at scrape
    time; no series in file mode. ``spec.policyName`` is whatever the PodSnapshot says: a pair
    that is not a live policy is counted under ``snapshots.selection.OTHER``
    (docs/reference/metrics.md, series bound).

    Args:
        state: the current cluster state; ``prunable``: the ``(namespace, name)`` keys the
            lifecycle worker found prunable in its last pass (default: none).
    """

    def __init__(
        self,
        state: Callable[[], ClusterState],
        prunable: Callable[[], Container[tuple[str, str]]] = lambda: (),
    ) -> None:
        self.state, self.prunable = state, prunable

    def collect(self) -> Iterable[GaugeMetricFamily]:
        """One sample per namespace, policy and state present in the cache."""
        current = self.state()
        if not current.snapshots_known:
            return
        family = GaugeMetricFamily(
            "snapready_snapshots",
            "PodSnapshots by namespace, policy and state (ready, stale, stale-config, "
            "awaiting, failed, not_ready, prunable: no pod can restore from it).",
            labels=["namespace", "policy", "state"],
        )
        counts: dict[tuple[str, str, str], int] = {}
        prunable = self.prunable()
        for view in current.snapshots.by_name.values():
            namespace, policy = bounded_labels(view.namespace, view.policy, current.policies)
            state = snapshot_state(view, current.node_pools, current.configs, prunable)
            key = (namespace, policy, state)
            counts[key] = counts.get(key, 0) + 1
        for key, count in sorted(counts.items()):
            family.add_metric(list(key), float(count))
        yield family


class RecordWritesCollector:
    """``snapready_snapshot_records_total{action}``: SnapshotRecords the leader wrote
    (``snapshots.records.RECORD_ACTIONS``: written, converted from an older snapready's
    annotation, restored after someone removed one; ``OriginRecorder.actions``, read at scrape
    time). A fixed label set: nothing a user writes adds a series."""

    def __init__(self, counts: Callable[[], Mapping[str, int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterable[CounterMetricFamily]:
        """One sample per action, zeros included."""
        counts = self.counts()
        family = CounterMetricFamily(
            "snapready_snapshot_records",
            "SnapshotRecords written by this replica as leader, by action (written, "
            "converted from an older annotation, restored after a removal).",
            labels=["action"],
        )
        for action in RECORD_ACTIONS:
            family.add_metric([action], float(counts.get(action, 0)))
        yield family


class EventCollector:
    """``snapready_events_total{result}``: Kubernetes Events this replica wrote as leader, by
    what became of them (``cluster.api.events.EVENT_RESULTS``: written, already written by an
    earlier leader, dropped by a rate limit, refused by the API server; read at scrape time from
    ``EventRecorder.results``). A fixed label set: dropped Events are logged with a count at
    most every 10 s and counted here one by one, so an alert sees every drop."""

    def __init__(self, counts: Callable[[], Mapping[str, int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterable[CounterMetricFamily]:
        """One sample per result, zeros included."""
        family = CounterMetricFamily(
            "snapready_events",
            "Kubernetes Events this replica wrote as leader, by result (written, already "
            "written by an earlier leader, dropped by a rate limit, failed).",
            labels=["result"],
        )
        for result, count in self.counts().items():
            family.add_metric([result], float(count))
        yield family


class PassCounts(Protocol):
    """What ``ControllerCollector`` reads of a controller (``controllers.base.Reconciler``)."""

    name: str
    pass_count: int
    failures: int
    pass_seconds: float
    pass_cpu_seconds: float


class ControllerCollector:
    """Each background controller's passes, as controller-runtime's
    ``controller_runtime_reconcile_total`` / ``_errors_total`` / ``_time_seconds`` let an
    operator see them: ``snapready_controller_passes_total{controller}``,
    ``snapready_controller_pass_failures_total{controller}``,
    ``snapready_controller_pass_seconds_total{controller}`` (wall clock) and
    ``snapready_controller_pass_cpu_seconds_total{controller}`` (the controller thread's own
    CPU: what its passes took from the interpreter that also answers the API server; a
    ``rate`` of it over a ``rate`` of passes is the CPU per pass). Read at scrape time; one
    series per controller of this process, a fixed set (``cluster.manager.Cluster``)."""

    def __init__(self, controllers: Callable[[], Iterable[PassCounts]]) -> None:
        self.controllers = controllers

    def collect(self) -> Iterable[CounterMetricFamily]:
        """Four counter families, one sample per controller each."""
        controllers = tuple(self.controllers())
        label = ["controller"]
        families = (
            (
                CounterMetricFamily(
                    "snapready_controller_passes",
                    "Passes, failed ones too, by controller.",
                    labels=label,
                ),
                "pass_count",
            ),
            (
                CounterMetricFamily(
                    "snapready_controller_pass_failures",
                    "Passes that raised, by controller (each retried after a backoff).",
                    labels=label,
                ),
                "failures",
            ),
            (
                CounterMetricFamily(
                    "snapready_controller_pass_seconds",
                    "Wall-clock seconds in passes, by controller.",
                    labels=label,
                ),
                "pass_seconds",
            ),
            (
                CounterMetricFamily(
                    "snapready_controller_pass_cpu_seconds",
                    "CPU seconds of the controller's own thread in passes, by controller.",
                    labels=label,
                ),
                "pass_cpu_seconds",
            ),
        )
        for family, attribute in families:
            for controller in controllers:
                family.add_metric([controller.name], float(getattr(controller, attribute)))
            yield family
