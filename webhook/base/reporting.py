"""Settings of the policy reports and the audit of existing objects (docs/concepts/reports.md).

Nested in ``webhook.base.config.Settings`` as ``reports``. The leader judges every pod and
workload template a PodSnapshotPolicy selects, from list pages it paces, and writes one report
per object (OpenReports ``openreports.io/v1alpha1`` ``Report``, else ``wgpolicyk8s.io/v1alpha2``
``PolicyReport``). Every default bounds what a 20,000-pod cluster costs the API server and etcd:
kyverno/kyverno#10761 had 811,742 report objects take an API server down.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from webhook.base.section import Section

ReportApiChoice = Literal["auto", "openreports", "wgpolicyk8s", "off"]
ResultStatus = Literal["pass", "fail", "warn", "error", "skip"]
"""A result's status: the ``result`` enum of both report APIs (OpenReports
``apis/openreports.io/v1alpha1/report_types.go`` ``Result``; wg-policy ``v1alpha2``)."""
KEPT_BY_DEFAULT: tuple[ResultStatus, ...] = ("fail", "warn", "error")
"""``reports.results`` by default: what needs fixing, nothing about objects that pass."""


class ReportSettings(Section):
    """Which report API, which results are kept, and how fast the leader reads and writes."""

    api: ReportApiChoice = Field(
        "auto",
        description="`auto`: OpenReports (openreports.io/v1alpha1 Report) when its CRD is "
        "served, else wg-policy (wgpolicyk8s.io/v1alpha2 PolicyReport), found through discovery "
        "(re-checked every source.resync_seconds); `openreports` or `wgpolicyk8s`: that one "
        "only (the chart sets the one its ClusterRole grants); `off`: no reports. The leader's "
        "audit runs only while reports are written (no background reads otherwise); with no "
        "API served, reports are off and /readyz and one log line say so. `snapready status` "
        "judges never-judged pods itself either way.",
    )
    results: list[ResultStatus] = Field(
        default_factory=lambda: list(KEPT_BY_DEFAULT),
        min_length=1,
        description="Result statuses written (Kyverno's allowedResults); an object whose "
        "results are all filtered out gets no report (an existing one is deleted). Default "
        "fail, warn, error: a report for every object with something to fix, none for the "
        "rest, so the object count follows the problems, not the cluster size. Add pass and "
        "skip for one report per selected object (restore predictions hit and none included).",
    )
    writes_per_second: float = Field(
        10.0,
        gt=0,
        description="Report writes (create, patch, delete) per second at most (token bucket, "
        "burst write_burst). 10/s (600/min) writes 20,000 reports in 33 min on a first start "
        "and keeps the leader's share of the API server's default 400 mutating inflight "
        "requests at a few; after that only changes are written.",
    )
    write_burst: int = Field(20, ge=1, description="Writes allowed at once (token bucket burst).")
    audit_objects_per_second: float = Field(
        50.0,
        gt=0,
        description="Pods and workload templates judged per second at most. Measured at "
        "bench-scale: ~1.9 ms of CPU per pod (its share of the list page, the judgement with "
        "its restore prediction, the digest), so 50/s is ~10% of one core while a pass runs and "
        "covers 20,000 pods in ~400 s; the list pages are fetched only as fast as they are "
        "judged, so the API server sees one page every audit_page_size / 50 s.",
    )
    audit_page_size: int = Field(
        100,
        ge=1,
        le=500,
        description="Objects per list page of the audit. 100 pods (~800 KB of JSON) parse in a "
        "few ms, so a page never holds the interpreter long enough to delay an admission; a "
        "page's continue token outlives its pacing (etcd compacts after 5 min).",
    )
    audit_period_seconds: float = Field(
        3600.0,
        gt=0,
        description="Seconds between full audits (every namespace with a policy), besides the "
        "one when this replica starts leading and one per namespace whose policies changed. "
        "Kyverno's background scan default is 1 h; a pod created while snapready was down "
        "(failurePolicy Ignore) is found within this period, stamped pods at once.",
    )
    templates: bool = Field(
        True,
        description="Also judge the pod templates of Deployments, StatefulSets, DaemonSets, "
        "Jobs (not those a CronJob owns) and CronJobs (needs list on them: the chart grants it "
        "with reports on).",
    )
