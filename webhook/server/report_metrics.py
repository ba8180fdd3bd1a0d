"""Scrape-time series of the audit and its policy reports (``cluster.controllers.audit``), leader
only.

``snapready_reports_total{action}`` (created, updated, deleted, failed: this replica's report writes
as leader), ``snapready_report_objects`` and ``snapready_report_results{result}`` (what snapready's
reports hold, from the leader's report cache), ``snapready_audit_never_judged`` and
``snapready_audit_would_deny`` ``{namespace, policy, kind}`` (objects a policy selects that
admission never judged, and those of them admission would deny now) and
``snapready_audit_last_pass_timestamp_seconds``. Label values are bounded like every other series
(``snapshots.selection.bounded_labels``: live policies only; ``kind`` is ``Pod`` or one of the five
workload kinds); a follower, or a replica with reports off, has only the write counter."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from webhook.cluster.controllers.audit.reports import REPORT_ACTIONS, summed
from webhook.cluster.controllers.audit.worker import AuditWorker
from webhook.snapshots.audit import counts
from webhook.snapshots.selection import bounded_labels


class ReportCollector:
    """The series above, read from ``audit`` (and its writer) at scrape time."""

    def __init__(self, audit: AuditWorker) -> None:
        self.audit = audit

    def collect(self) -> Iterable[Any]:
        """Every family; gauges only while this replica writes reports as leader."""
        writer = self.audit.writer
        writes = CounterMetricFamily(
            "snapready_reports",
            "Policy report writes of this replica as leader, by action (created, updated, "
            "deleted, failed).",
            labels=["action"],
        )
        for action in REPORT_ACTIONS:
            writes.add_metric([action], float(writer.actions.get(action, 0)))
        yield writes
        if writer.api is None or not self.audit.full_passes:
            return
        reports = writer.reports()
        objects = GaugeMetricFamily(
            "snapready_report_objects", "Policy report objects snapready keeps (leader)."
        )
        objects.add_metric([], float(len(reports)))
        yield objects
        results = GaugeMetricFamily(
            "snapready_report_results",
            "Results in snapready's policy reports by status (pass, fail, warn, error, skip).",
            labels=["result"],
        )
        for status, count in summed(reports).items():
            results.add_metric([status], float(count))
        yield results
        yield from self._audit()

    def _audit(self) -> Iterable[GaugeMetricFamily]:
        policies = self.audit.state().policies
        never = GaugeMetricFamily(
            "snapready_audit_never_judged",
            "Running pods and workload templates a policy selects that admission never judged "
            "(created before snapready or the policy, or while snapready was down).",
            labels=["namespace", "policy", "kind"],
        )
        deny = GaugeMetricFamily(
            "snapready_audit_would_deny",
            "Of the never-judged objects, those admission would deny now.",
            labels=["namespace", "policy", "kind"],
        )
        merged: dict[tuple[str, str, str], tuple[int, int]] = {}
        for (namespace, policy, kind), (total, denied) in counts(self.audit.never).items():
            key = (*bounded_labels(namespace, policy, policies), kind)
            before = merged.get(key, (0, 0))
            merged[key] = (before[0] + total, before[1] + denied)
        for key, (total, denied) in sorted(merged.items()):
            never.add_metric(list(key), float(total))
            deny.add_metric(list(key), float(denied))
        yield never
        yield deny
        if self.audit.last_pass is not None:
            last = GaugeMetricFamily(
                "snapready_audit_last_pass_timestamp_seconds",
                "When the leader's last full audit pass ended (Unix seconds).",
            )
            last.add_metric([], self.audit.last_pass)
            yield last
