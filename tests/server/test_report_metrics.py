"""The audit's and the reports' series (``server.report_metrics``), read at scrape time."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scripts.docsgen import metrics as docs_metrics
from tests.conftest import ROOT
from webhook.kube.matching import Policy, PolicyIndex, compile_selector
from webhook.kube.policy_reports import OPENREPORTS, ReportView
from webhook.server.report_metrics import ReportCollector
from webhook.snapshots.audit import NeverJudged
from webhook.snapshots.state import ClusterState

STATE = ClusterState(
    policies=PolicyIndex.build([Policy("llm-policy", "llm", compile_selector({}), "storage")])
)


def audit(api: Any = OPENREPORTS, passes: int = 1) -> Any:
    reports = [
        ReportView("llm", "u1", "r1", "d", (0, 1, 2, 0, 0)),
        ReportView("llm", "u2", "r2", "d", (1, 0, 1, 0, 0)),
    ]
    writer = SimpleNamespace(actions={"created": 2, "updated": 1}, api=api, reports=lambda: reports)
    never = {
        "u1": NeverJudged("llm", "llm-policy", "Pod", True),
        "u3": NeverJudged("llm", "llm-policy", "Pod", False),
        "u4": NeverJudged("llm", "made-up-by-a-tenant", "Pod", True),
    }
    return SimpleNamespace(
        writer=writer, full_passes=passes, never=never, last_pass=1796535653.0, state=lambda: STATE
    )


def scraped(collector: ReportCollector) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    registry = CollectorRegistry()
    registry.register(collector)
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                key = tuple(sorted(sample.labels.items()))
                found.setdefault(sample.name, {})[key] = sample.value
    return found


def test_the_leaders_report_and_audit_series() -> None:
    found = scraped(ReportCollector(cast(Any, audit())))
    writes = found["snapready_reports_total"]
    assert writes[(("action", "created"),)] == 2 and writes[(("action", "failed"),)] == 0
    assert found["snapready_report_objects"] == {(): 2}
    results = found["snapready_report_results"]
    assert (results[(("result", "warn"),)], results[(("result", "fail"),)]) == (3, 1)
    never = found["snapready_audit_never_judged"]
    # A policy name that is no live policy is counted under (other): bounded series.
    assert never == {
        (("kind", "Pod"), ("namespace", "llm"), ("policy", "llm-policy")): 2,
        (("kind", "Pod"), ("namespace", "(other)"), ("policy", "(other)")): 1,
    }
    deny = found["snapready_audit_would_deny"]
    assert deny[(("kind", "Pod"), ("namespace", "llm"), ("policy", "llm-policy"))] == 1
    assert found["snapready_audit_last_pass_timestamp_seconds"] == {(): 1796535653.0}


def test_a_follower_or_reports_off_exports_the_write_counter_only() -> None:
    for off in (audit(api=None), audit(passes=0)):
        assert set(scraped(ReportCollector(cast(Any, off)))) == {"snapready_reports_total"}


def test_the_docs_document_every_report_metric() -> None:
    """The metrics reference (generated from the source scan) has every report series."""
    documented = {m.exposed: m.help for m in docs_metrics.metrics(ROOT / "webhook")}
    for family in ReportCollector(cast(Any, audit())).collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        assert documented.get(name), f"{name} is not documented"
