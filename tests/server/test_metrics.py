"""Prometheus metrics (issue: operations): series, labels and the plain-HTTP ``/metrics`` port.

Counting is checked in-process against a fresh registry with rules whose findings are known;
one test scrapes a real ``snapready serve`` on its metrics port.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from scripts.docsgen import metrics as docs_metrics
from tests.conftest import ROOT, RunningServer, load_review, make_settings
from tests.support.ports import free_port
from webhook.admission.engine import Engine
from webhook.base.types import Finding
from webhook.cluster.api.events import Event, EventRecorder, Regarding
from webhook.kube.responses import allowed, patched
from webhook.kube.review import parse_review
from webhook.pod.context import PodContext
from webhook.server import certs
from webhook.server.app import create_app
from webhook.server.metrics import Metrics
from webhook.server.runner import build_engine, watch_cluster
from webhook.snapshots.state import ClusterState

FAMILIES = (
    "snapready_admission_requests",
    "snapready_admission_duration_seconds",
    "snapready_rule_findings",
    "snapready_mutations",
    "snapready_policy_source_synced",
    "snapready_tls_certificate_expiry_timestamp_seconds",
    "snapready_internal_errors",
)


class KnownRule:
    """One deny finding and one advisory (warn) finding on every pod view."""

    rule_ids: tuple[str, ...] = ("gvisor-runtime", "gpu-sharing")

    def __call__(self, pod: PodContext) -> list[Finding]:
        return [
            Finding(pod.spec_field("containers"), "gvisor-runtime", "fix", "deny"),
            Finding(pod.spec_field("volumes"), "gpu-sharing", "consider", "warn"),
        ]


class ExplodingRule:
    """Raises, to reach the internal-error path."""

    rule_ids: tuple[str, ...] = ("explode",)

    def __call__(self, pod: PodContext) -> list[Finding]:
        raise RuntimeError("boom")


def run_reviews(metrics: Metrics, engine: Engine, posts: list[tuple[str, bytes]]) -> list[int]:
    """Post each (path, body) through the ASGI app observed by ``metrics``; return statuses."""
    app = create_app(engine, observer=metrics.observe, on_reject=metrics.reject)

    async def post_all() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://t") as client:
            headers = {"Content-Type": "application/json"}
            return [
                (await client.post(path, content=body, headers=headers)).status_code
                for path, body in posts
            ]

    return asyncio.run(post_all())


def engine_with(*rules: Any, **settings: Any) -> Engine:
    """The example-policy engine with ``rules`` instead of the real table."""
    base = build_engine(make_settings(**settings))
    return Engine(settings=base.settings, state=base.state, rules=rules)


def review_body(name: str, **request: Any) -> bytes:
    """A captured review, with ``request`` fields replaced, as bytes."""
    review = load_review(name)
    review["request"].update(request)
    return json.dumps(review).encode()


def value(metrics: Metrics, name: str, **labels: str) -> float:
    """The current sample value (0 when the series does not exist yet)."""
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_requests_are_counted_by_endpoint_kind_operation_and_decision() -> None:
    metrics = Metrics()
    configmap = {"group": "", "version": "v1", "kind": "ConfigMap"}
    statuses = run_reviews(
        metrics,
        engine_with(KnownRule()),
        [
            ("/mutate", review_body("01")),  # unselected pod
            ("/validate", review_body("03")),  # selected: KnownRule denies
            ("/validate", review_body("13")),  # Deployment template: denied
            ("/validate", review_body("01", kind=configmap)),  # not in the dispatch table
            ("/validate", b"{not json"),
        ],
    )
    assert statuses == [200, 200, 200, 200, 400]
    total = "snapready_admission_requests_total"
    assert value(metrics, total, endpoint="mutate", kind="Pod", operation="CREATE",
                 decision="allowed") == 1  # fmt: skip
    assert value(metrics, total, endpoint="validate", kind="Pod", operation="CREATE",
                 decision="denied") == 1  # fmt: skip
    assert value(metrics, total, endpoint="validate", kind="Deployment", operation="CREATE",
                 decision="denied") == 1  # fmt: skip
    assert value(metrics, total, endpoint="validate", kind="other", operation="CREATE",
                 decision="allowed") == 1  # fmt: skip
    assert value(metrics, "snapready_rejected_requests_total", endpoint="validate", code="400") == 1
    findings = "snapready_rule_findings_total"
    assert value(metrics, findings, rule="gvisor-runtime", mode="enforce") == 2
    assert value(metrics, findings, rule="gpu-sharing", mode="warn") == 2
    assert value(metrics, "snapready_internal_errors_total") == 0
    assert value(metrics, "snapready_admission_duration_seconds_count", endpoint="validate") == 3


@pytest.mark.parametrize(
    ("settings", "deny_mode", "warn_mode"),
    [
        pytest.param(
            {"enforcement": "warn"}, "warn", "warn", id="warn-mode-turns-denials-into-warnings"
        ),
        pytest.param({"enforcement": "audit"}, "audit", "audit", id="audit-mode-only-records"),
        pytest.param(
            {"rules": {"modes": {"gvisor-runtime": "audit"}}},
            "audit",
            "warn",
            id="per-rule-override",
        ),
    ],
)
def test_findings_are_labelled_with_the_mode_they_ended_in(
    settings: dict[str, Any], deny_mode: str, warn_mode: str
) -> None:
    metrics = Metrics()
    run_reviews(metrics, engine_with(KnownRule(), **settings), [("/validate", review_body("03"))])
    findings = "snapready_rule_findings_total"
    assert value(metrics, findings, rule="gvisor-runtime", mode=deny_mode) == 1
    assert value(metrics, findings, rule="gpu-sharing", mode=warn_mode) == 1


def test_internal_errors_are_counted_and_labelled_error() -> None:
    metrics = Metrics()
    run_reviews(metrics, engine_with(ExplodingRule()), [("/validate", review_body("03"))])
    assert value(metrics, "snapready_internal_errors_total") == 1
    assert value(metrics, "snapready_admission_requests_total", endpoint="validate", kind="Pod",
                 operation="CREATE", decision="error") == 1  # fmt: skip


def test_mutators_are_counted_when_the_decision_names_them() -> None:
    metrics = Metrics()
    review = parse_review(review_body("03"))
    op = {"op": "add", "path": "/metadata/annotations/x", "value": "1"}
    with_names = patched([op])
    with_names.audit["mutators"] = ["helpers", "fingerprint"]
    metrics.observe("mutate", review, with_names, 0.001)
    metrics.observe("mutate", review, patched([op]), 0.001)  # no names: nothing to count
    assert value(metrics, "snapready_mutations_total", mutator="helpers") == 1
    assert value(metrics, "snapready_mutations_total", mutator="fingerprint") == 1
    assert value(metrics, "snapready_admission_requests_total", endpoint="mutate", kind="Pod",
                 operation="CREATE", decision="patched") == 2  # fmt: skip


def test_duration_histogram_spans_half_a_millisecond_to_two_and_a_half_seconds() -> None:
    metrics = Metrics()
    review = parse_review(review_body("01"))
    for seconds in (0.0001, 0.003, 3.0):
        metrics.observe("validate", review, allowed(), seconds)
    bucket = "snapready_admission_duration_seconds_bucket"
    assert value(metrics, bucket, endpoint="validate", le="0.0005") == 1
    assert value(metrics, bucket, endpoint="validate", le="2.5") == 2
    assert value(metrics, bucket, endpoint="validate", le="+Inf") == 3


def test_synced_gauge_follows_the_policy_source() -> None:
    metrics = Metrics()
    current = [ClusterState(synced=False)]
    metrics.watch_state(lambda: current[0])
    assert value(metrics, "snapready_policy_source_synced") == 0
    current[0] = replace(current[0], synced=True)
    assert value(metrics, "snapready_policy_source_synced") == 1


def test_certificate_expiry_is_the_certificates_not_after(tmp_path: Path) -> None:
    paths = certs.generate(tmp_path)
    metrics = Metrics()
    metrics.record_certificate(paths.tls_cert)
    parsed = x509.load_pem_x509_certificate(paths.tls_cert.read_bytes())
    expected = parsed.not_valid_after_utc.timestamp()
    assert value(metrics, "snapready_tls_certificate_expiry_timestamp_seconds") == expected


def test_real_server_serves_metrics_on_its_plain_http_port(
    server_factory: Callable[..., RunningServer],
) -> None:
    port = free_port()
    server = server_factory(env={"SNAPREADY_SERVER__METRICS_PORT": str(port)})
    with server.client() as client:
        for path, name in (("/mutate", "03"), ("/validate", "01"), ("/validate", "13")):
            body = review_body(name)
            client.post(path, content=body, headers={"Content-Type": "application/json"})
    scrape = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert scrape.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(scrape.text)}
    assert set(FAMILIES) <= set(families)
    requests = [s for s in families["snapready_admission_requests"].samples
                if s.name.endswith("_total")]  # fmt: skip
    by_kind = {(s.labels["endpoint"], s.labels["kind"]): s.value for s in requests}
    assert by_kind == {("mutate", "Pod"): 1, ("validate", "Pod"): 1, ("validate", "Deployment"): 1}
    decisions = {(s.labels["endpoint"], s.labels["decision"]) for s in requests}
    assert ("mutate", "patched") in decisions, "review 03 is selected: it gets the spec-hash"
    mutations = {s.labels["mutator"]: s.value for s in families["snapready_mutations"].samples
                 if s.name.endswith("_total")}  # fmt: skip
    assert mutations.get("spec-hash") == 1
    synced = families["snapready_policy_source_synced"].samples[0].value
    assert synced == 1
    expiry = families["snapready_tls_certificate_expiry_timestamp_seconds"].samples[0].value
    cert = x509.load_pem_x509_certificate((server.cert_dir / "tls.crt").read_bytes())
    assert expiry == cert.not_valid_after_utc.timestamp()
    assert httpx.get(f"http://127.0.0.1:{port}/other", timeout=10).status_code == 404


def test_the_docs_document_every_metric() -> None:
    """The metrics reference is generated from the source scan (scripts/docsgen/metrics.py):
    every series the registry exposes is one it finds, with help text."""
    documented = {m.exposed: m.help for m in docs_metrics.metrics(ROOT / "webhook")}
    for family in Metrics().registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        assert documented.get(name), f"{name} is not documented"


def test_cluster_mode_exports_what_became_of_the_leaders_events() -> None:
    # watch_cluster wires the Event recorder's counts into /metrics (a dropped Event is logged
    # with a count at most every 10 s; the counter is what an alert can see).
    class Refusing:
        def create(self, path: str, body: Any) -> Any:
            raise AssertionError("every Event here is over the limit")

    events = EventRecorder(Refusing(), "leader-0", burst=0)  # type: ignore[arg-type]
    regarding = Regarding("v1", "Pod", "team-a", "pod-0")
    for _ in range(3):
        events.emit(Event(regarding, "Warning", "SnapshotRestoreMissed", "Restore", "cold"))
    lifecycle = SimpleNamespace(prunable=lambda: {}, on_refresh=[], on_prune=[])
    writer = SimpleNamespace(actions={}, api=None, reports=lambda: [])
    cluster = SimpleNamespace(
        lifecycle=lifecycle,
        restores=SimpleNamespace(listeners=[]),
        checkpoints=SimpleNamespace(listeners=[]),
        origins=SimpleNamespace(actions={}),
        audit=SimpleNamespace(writer=writer, full_passes=0, never={}, last_pass=0.0),
        controllers=[],
        events=events,
    )
    source = SimpleNamespace(cluster=cluster, engine=SimpleNamespace(state=ClusterState))
    metrics = Metrics(CollectorRegistry())
    watch_cluster(metrics, source)  # type: ignore[arg-type]
    value = metrics.registry.get_sample_value
    assert value("snapready_events_total", {"result": "dropped"}) == 3.0
    assert value("snapready_events_total", {"result": "written"}) == 0.0
