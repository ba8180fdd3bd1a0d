"""The chart's opt-in Grafana dashboard and PrometheusRule (values ``monitoring.*``).

Both are rendered with the real Helm engine (``.Files.Get`` reads ``chart/files/`` there too) and
checked against what snapready really exports: the metric names come from a live
``webhook.server.metrics.Metrics`` registry (``registry.collect()``), expanded to the sample
names Prometheus stores (``_total``, ``_bucket``, ``_sum``, ``_count``, ``_created``), a rule
that one test confirms against ``generate_latest``.

PromQL is parsed with ``promql-parser`` (a binding of the Rust port of Prometheus' own parser,
``promql_parser.parse``): a syntax error, an unknown function or a wrong argument type fails
the way ``promtool check rules`` would. Every metric selector of the parsed expressions must
name an exported sample, and every label matcher a label that metric has. Grafana's interval
macros (``$__rate_interval`` ...) are replaced by a duration before parsing, as Grafana does.

The restore, start-up and snapshot metrics (``CONTRACT``) are named by contract: the tests fail,
not skip, while ``webhook/server/metrics.py`` does not export them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import helm_python
import promql_parser
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from tests.support.helm_support import (
    CHART,
    Obj,
    by_kind,
    objects,
    one,
    render,
    settings_configmap,
    validate_all,
)
from webhook.kube.policy_reports import OPENREPORTS, ReportView
from webhook.server.collectors import ControllerCollector
from webhook.server.metrics import Metrics
from webhook.server.report_metrics import ReportCollector
from webhook.snapshots.audit import NeverJudged
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.outcomes import OUTCOMES
from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import SnapshotView

DASHBOARD_FILE = CHART / "files" / "snapready-dashboard.json"
ENABLED = {
    "monitoring": {"grafanaDashboard": {"enabled": True}, "prometheusRule": {"enabled": True}}
}

CONTRACT: dict[str, tuple[str, frozenset[str]]] = {
    "snapready_restores": ("counter", frozenset({"namespace", "policy", "outcome"})),
    "snapready_pod_startup_seconds": ("histogram", frozenset({"policy", "outcome"})),
    "snapready_snapshots": ("gauge", frozenset({"namespace", "policy", "state"})),
    "snapready_restore_seconds": ("histogram", frozenset({"policy"})),
    "snapready_pod_ready_seconds": ("histogram", frozenset({"policy", "outcome"})),
    "snapready_checkpoints": ("counter", frozenset({"namespace", "policy", "outcome"})),
    "snapready_checkpoint_seconds": ("histogram", frozenset({"policy"})),
}
"""Family name -> (type, label names) of the metrics the restore-outcome work adds."""
LABEL_VALUES: dict[str, frozenset[str]] = {
    "outcome": frozenset(OUTCOMES) | {"succeeded", "failed"},
    "state": frozenset({"ready", "stale", "awaiting", "failed", "not_ready"}),
}
"""Closed label value sets a matcher may use (outcomes from webhook.snapshots.outcomes)."""

SAMPLE_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("_sum", "_count", "_created"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "info": ("_info",),
    "stateset": ("",),
    "unknown": ("",),
}
"""Sample names prometheus_client exposes per family type (counters gain ``_total``)."""
GRAFANA_MACROS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "6h"}
"""Grafana's interval macros, replaced by a duration before parsing (Grafana substitutes them)."""
DURATION = re.compile(
    r"0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?"
)
"""A Prometheus duration, as the PrometheusRule CRD's ``for`` field accepts it."""
EXPECTED_ALERTS = {
    "SnapreadyRestoreMissed",
    "SnapreadyRestoreFailed",
    "SnapreadyCheckpointFailed",
    "SnapreadyCheckpointStalled",
    "SnapreadySnapshotsStale",
    "SnapreadyInternalErrors",
    "SnapreadyPolicySourceNotSynced",
    "SnapreadyWebhookScopeNotSynced",
    "SnapreadyCertificateExpiry",
    "SnapreadyNeverJudgedWouldDeny",
}


# --- what snapready exports --------------------------------------------------------------------


def _metrics() -> Metrics:
    """A fresh ``Metrics`` with the scrape-time collectors of cluster mode registered too, over a
    cluster state with one Ready snapshot (so the snapshot gauge has a series)."""
    metrics = Metrics(CollectorRegistry())
    snapshot = SnapshotView(
        namespace="ns", name="snap", policy="p", origin_pod=None, ready=True, reason="", created=""
    )
    state = ClusterState(
        details={"source": "kube", "podsnapshotpolicies": "synced"},
        snapshots=SnapshotIndex.build([snapshot]),
        snapshots_known=True,
    )
    metrics.watch_state(lambda: state)
    never = {"uid": NeverJudged("ns", "p", "Pod", True)}
    report = ReportView("ns", "uid", "r", "d", (0, 1, 0, 0, 0))
    writer = SimpleNamespace(actions={}, api=OPENREPORTS, reports=lambda: [report])
    audit = SimpleNamespace(
        writer=writer, full_passes=1, never=never, last_pass=1.0, state=ClusterState
    )
    metrics.registry.register(ReportCollector(cast(Any, audit)))  # leader with reports on
    lifecycle = SimpleNamespace(
        name="lifecycle", pass_count=3, failures=1, pass_seconds=0.3, pass_cpu_seconds=0.2
    )
    metrics.registry.register(ControllerCollector(lambda: [cast(Any, lifecycle)]))
    # one answered review: the per-review families (scrape-time counts) then have series
    metrics.admissions.add(
        ("validate", "Pod", "CREATE", "denied"), 0.001, [("r", "enforce")], ["m"]
    )
    return metrics


def _wrappers(metrics: Metrics) -> list[MetricWrapperBase]:
    """Every series object of ``metrics`` and its ``outcomes`` part (each once)."""
    found = {
        id(value): value
        for owner in (metrics, metrics.outcomes)
        for value in vars(owner).values()
        if isinstance(value, MetricWrapperBase)
    }
    return list(found.values())


def exported_families() -> dict[str, str]:
    """Family name -> type, from the registry."""
    return {family.name: family.type for family in _metrics().registry.collect()}


def exported_samples() -> set[str]:
    """Every sample name the registry exposes (labelled families included, even childless)."""
    names: set[str] = set()
    for family in _metrics().registry.collect():
        names |= {family.name + suffix for suffix in SAMPLE_SUFFIXES[family.type]}
        names |= {sample.name for sample in family.samples}
    return names


def _populated_exposition() -> dict[str, set[str]]:
    """Sample name -> label names, scraped from a registry where every labelled series has one
    child (``generate_latest``, the text format Prometheus scrapes)."""
    metrics = _metrics()
    for wrapper in _wrappers(metrics):
        if wrapper._labelnames:
            wrapper.labels(*["x"] * len(wrapper._labelnames))
    text = generate_latest(metrics.registry).decode()
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    return labels


def metric_labels() -> dict[str, frozenset[str]]:
    """Sample name -> label names of its series (``le`` on buckets); contract labels for the
    contract metrics that cannot be populated here."""
    found = {name: frozenset(labels) for name, labels in _populated_exposition().items()}
    for family, (kind, labels) in CONTRACT.items():
        for suffix in SAMPLE_SUFFIXES[kind]:
            extra = {"le"} if suffix == "_bucket" else set()
            found.setdefault(family + suffix, labels | extra)
    return found


def test_counters_are_exposed_with_total_and_histograms_with_buckets() -> None:
    """The suffix rule used for childless families, checked against a real exposition."""
    exposed = set(_populated_exposition())
    assert exposed <= exported_samples()
    families = exported_families()
    metrics = _metrics()
    populated = {wrapper._name for wrapper in _wrappers(metrics)}
    populated |= {family.name for family in metrics.admissions.collect()}
    for name, kind in families.items():
        if name not in populated:
            continue  # a scrape-time collector: no series without a real cluster state
        if kind == "counter":
            assert f"{name}_total" in exposed and name not in exposed, name
        if kind == "histogram":
            assert {f"{name}_bucket", f"{name}_sum", f"{name}_count"} <= exposed, name
    assert "snapready_admission_requests_total" in exposed


@pytest.mark.parametrize("family", sorted(CONTRACT))
def test_contract_metrics_are_exported(family: str) -> None:
    """Fails (never skips) until webhook/server/metrics.py registers the metric."""
    kind, labels = CONTRACT[family]
    families = exported_families()
    assert family in families, f"{family} is not registered by webhook.server.metrics.Metrics"
    assert families[family] == kind
    first_sample = family + SAMPLE_SUFFIXES[kind][0]
    assert _populated_exposition()[first_sample] - {"le"} == labels


# --- PromQL helpers ----------------------------------------------------------------------------


def parse(expr: str) -> promql_parser.Expr:
    """Parse ``expr`` after Grafana's macro substitution; fail on any other ``$`` variable."""
    for macro, value in GRAFANA_MACROS.items():
        expr = expr.replace(macro, value)
    if "$" in expr:
        pytest.fail(f"unknown Grafana variable in {expr!r}")
    try:
        return promql_parser.parse(expr)
    except ValueError as exc:
        pytest.fail(f"PromQL does not parse: {expr!r}: {exc}")


def selectors(ast: promql_parser.Expr) -> list[promql_parser.VectorSelector]:
    found: list[promql_parser.VectorSelector] = []

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)

    promql_parser.walk(ast, visit)
    return found


def selector_name(selector: promql_parser.VectorSelector) -> str | None:
    """The metric name, from the selector or an exact ``__name__`` matcher."""
    if selector.name:
        return selector.name
    for matcher in selector.matchers.matchers:
        if matcher.name == "__name__" and matcher.op == promql_parser.MatchOp.Equal:
            return matcher.value
    return None


def _is_scalar(node: promql_parser.Expr) -> bool:
    if isinstance(node, promql_parser.NumberLiteral):
        return True
    if isinstance(node, promql_parser.Call):
        return bool(node.func.return_type == promql_parser.ValueType.Scalar)
    if isinstance(node, promql_parser.ParenExpr | promql_parser.UnaryExpr):
        return _is_scalar(node.expr)
    if isinstance(node, promql_parser.BinaryExpr):
        return _is_scalar(node.lhs) and _is_scalar(node.rhs)
    return False


def result_labels(node: promql_parser.Expr) -> frozenset[str] | None:
    """Labels the result series keep: a set after ``by``/plain aggregation, None when they keep
    the selected series' labels (any label of the metric or of the scrape target)."""
    if isinstance(node, promql_parser.AggregateExpr):
        modifier = node.modifier
        if modifier is None:
            return frozenset()
        if modifier.type == promql_parser.AggModifierType.By:
            return frozenset(modifier.labels)
        return None
    if isinstance(node, promql_parser.BinaryExpr):
        side = node.rhs if _is_scalar(node.lhs) else node.lhs
        return result_labels(side)
    if isinstance(node, promql_parser.ParenExpr | promql_parser.UnaryExpr):
        return result_labels(node.expr)
    if isinstance(node, promql_parser.Call):
        vectors = [arg for arg in node.args if not _is_scalar(arg)]
        return result_labels(vectors[0]) if vectors else frozenset()
    if isinstance(node, promql_parser.MatrixSelector):
        return None
    if isinstance(node, promql_parser.SubqueryExpr):
        return result_labels(node.expr)
    return None


def check_expression(expr: str) -> list[str]:
    """Problems of one expression: unknown metrics, unknown labels or label values in matchers,
    a range vector or string as the result."""
    ast = parse(expr)
    samples, labels = exported_samples(), metric_labels()
    problems: list[str] = []
    if isinstance(ast, promql_parser.MatrixSelector | promql_parser.SubqueryExpr):
        problems.append(f"{expr!r}: evaluates to a range vector")
    if isinstance(ast, promql_parser.StringLiteral):
        problems.append(f"{expr!r}: evaluates to a string")
    found = selectors(ast)
    if not found:
        problems.append(f"{expr!r}: selects no metric")
    for selector in found:
        name = selector_name(selector)
        if name is None or name not in samples:
            problems.append(f"{expr!r}: {name or selector} is not a metric snapready exports")
            continue
        for matcher in selector.matchers.matchers:
            if matcher.name == "__name__":
                continue
            if matcher.name not in labels.get(name, frozenset()):
                problems.append(f"{expr!r}: {name} has no label {matcher.name!r}")
            allowed = LABEL_VALUES.get(matcher.name)
            if allowed is not None and matcher.op in (
                promql_parser.MatchOp.Equal,
                promql_parser.MatchOp.NotEqual,
                promql_parser.MatchOp.Re,
                promql_parser.MatchOp.NotRe,
            ):
                values = set(matcher.value.split("|"))
                if not values <= allowed:
                    problems.append(f"{expr!r}: {matcher.name} has no value {values - allowed}")
    return problems


def test_checker_catches_typical_mistakes() -> None:
    """The expression checker itself: each broken expression yields a problem."""
    assert check_expression("sum(rate(snapready_internal_errors_total[5m]))") == []
    assert check_expression("rate(snapready_internal_errors[5m])")  # no _total
    assert check_expression('snapready_snapshots{status="stale"}')  # wrong label name
    assert check_expression('snapready_snapshots{state="expired"}')  # unknown value
    assert check_expression("snapready_admission_requests_total[5m]")  # range result
    with pytest.raises(pytest.fail.Exception):
        parse("sum by (outcome) rate(snapready_restores_total[5m])")
    with pytest.raises(pytest.fail.Exception):
        parse("rate(snapready_restores_total)")  # rate needs a range vector
    with pytest.raises(pytest.fail.Exception):
        parse("rate(snapready_restores_total[$__unknown])")


# --- the dashboard -----------------------------------------------------------------------------


def dashboard_configmaps(objs: list[Obj]) -> list[Obj]:
    return [c for c in by_kind(objs, "ConfigMap") if c is not settings_configmap(objs)]


def dashboard_of(objs: list[Obj]) -> dict[str, Any]:
    (configmap,) = dashboard_configmaps(objs)
    (text,) = configmap["data"].values()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows' nested panels included (rows themselves excluded)."""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def dashboard_expressions(dashboard: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(panel title, target) for every query target."""
    return [(panel["title"], target) for panel in panels(dashboard) for target in panel["targets"]]


def test_monitoring_objects_are_off_by_default() -> None:
    objs = objects(render())
    assert dashboard_configmaps(objs) == []
    assert by_kind(objs, "PrometheusRule") == []


@pytest.mark.parametrize(
    ("grafana", "rule"),
    [(True, False), (False, True), (True, True)],
    ids=["dashboard-only", "rule-only", "both"],
)
def test_each_object_renders_only_when_enabled(grafana: bool, rule: bool) -> None:
    values = {
        "monitoring": {
            "grafanaDashboard": {"enabled": grafana},
            "prometheusRule": {"enabled": rule},
        }
    }
    objs = objects(render(values))
    assert len(dashboard_configmaps(objs)) == int(grafana)
    assert len(by_kind(objs, "PrometheusRule")) == int(rule)


def test_dashboard_configmap_carries_the_sidecar_label_and_the_chart_file() -> None:
    objs = objects(render(ENABLED, name="prod", namespace="platform"))
    (configmap,) = dashboard_configmaps(objs)
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["namespace"] == "platform"
    assert configmap["metadata"]["name"] == "prod-snapready-dashboard"
    assert dashboard_of(objs) == json.loads(DASHBOARD_FILE.read_text())


def test_dashboard_label_namespace_and_annotations_are_configurable() -> None:
    values = {
        "monitoring": {
            "grafanaDashboard": {
                "enabled": True,
                "labelKey": "example.com/dashboard",
                "labelValue": "snapready",
                "namespace": "grafana",
                "annotations": {"grafana_folder": "Platform"},
            }
        }
    }
    (configmap,) = dashboard_configmaps(objects(render(values)))
    metadata = configmap["metadata"]
    assert metadata["labels"]["example.com/dashboard"] == "snapready"
    assert "grafana_dashboard" not in metadata["labels"]
    assert metadata["namespace"] == "grafana"
    assert metadata["annotations"] == {"grafana_folder": "Platform"}


def test_dashboard_queries_through_a_prometheus_datasource_variable() -> None:
    dashboard = dashboard_of(objects(render(ENABLED)))
    (variable,) = [v for v in dashboard["templating"]["list"] if v["name"] == "datasource"]
    assert (variable["type"], variable["query"]) == ("datasource", "prometheus")
    every = [*panels(dashboard), *(target for _, target in dashboard_expressions(dashboard))]
    assert {json.dumps(item["datasource"], sort_keys=True) for item in every} == {
        json.dumps({"type": "prometheus", "uid": "${datasource}"}, sort_keys=True)
    }
    nested = [p for row in dashboard["panels"] for p in row.get("panels", [])]
    ids = [panel["id"] for panel in [*dashboard["panels"], *nested]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    assert dashboard["uid"] and dashboard["title"]


def test_dashboard_covers_restores_snapshots_admission_and_sync() -> None:
    dashboard = dashboard_of(objects(render(ENABLED)))
    used = {
        selector_name(selector)
        for _, target in dashboard_expressions(dashboard)
        for selector in selectors(parse(target["expr"]))
    }
    assert {
        "snapready_restores_total",
        "snapready_pod_startup_seconds_bucket",
        "snapready_snapshots",
        "snapready_admission_duration_seconds_bucket",
        "snapready_admission_requests_total",
        "snapready_webhook_scope_synced",
        "snapready_policy_source_synced",
        "snapready_internal_errors_total",
        "snapready_restore_seconds_bucket",
        "snapready_pod_ready_seconds_bucket",
        "snapready_checkpoints_total",
        "snapready_checkpoint_seconds_bucket",
        "snapready_audit_never_judged",
        "snapready_audit_would_deny",
        "snapready_report_results",
        "snapready_reports_total",
        "snapready_controller_pass_cpu_seconds_total",
        "snapready_controller_passes_total",
        "snapready_controller_pass_failures_total",
    } <= used
    expressions = " ".join(target["expr"] for _, target in dashboard_expressions(dashboard))
    assert 'snapready_snapshots{state="stale"}' in expressions
    assert "histogram_quantile(0.5," in expressions and "histogram_quantile(0.9," in expressions


def test_every_dashboard_expression_parses_and_names_exported_metrics() -> None:
    dashboard = dashboard_of(objects(render(ENABLED)))
    problems = [
        f"{title}: {problem}"
        for title, target in dashboard_expressions(dashboard)
        for problem in check_expression(target["expr"])
    ]
    assert problems == []


def test_dashboard_legends_use_labels_the_query_keeps() -> None:
    dashboard = dashboard_of(objects(render(ENABLED)))
    for title, target in dashboard_expressions(dashboard):
        kept = result_labels(parse(target["expr"]))
        legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
        assert kept is None or legend <= kept, f"{title}: {legend - (kept or set())}"


# --- the PrometheusRule ------------------------------------------------------------------------


def rules_of(objs: list[Obj]) -> list[Obj]:
    rule = one(objs, "PrometheusRule")
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def test_prometheus_rule_has_the_expected_alerts_each_complete() -> None:
    objs = objects(render(ENABLED))
    rule = one(objs, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "snapready"
    groups = rule["spec"]["groups"]
    assert all(group["name"] and group["rules"] for group in groups)
    rules = rules_of(objs)
    assert {r["alert"] for r in rules} == EXPECTED_ALERTS
    assert len(rules) == len(EXPECTED_ALERTS)
    for alert in rules:
        assert set(alert) == {"alert", "expr", "for", "labels", "annotations"}, alert["alert"]
        assert DURATION.fullmatch(alert["for"]), alert["alert"]
        assert alert["labels"]["severity"] in {"warning", "critical"}
        assert alert["annotations"]["summary"].strip(), alert["alert"]
        assert len(alert["annotations"]["description"].split()) >= 20, alert["alert"]


def test_every_rule_expression_parses_and_names_exported_metrics() -> None:
    problems = [
        f"{alert['alert']}: {problem}"
        for alert in rules_of(objects(render(ENABLED)))
        for problem in check_expression(alert["expr"])
    ]
    assert problems == []


def test_rule_annotations_use_labels_the_expression_keeps() -> None:
    for alert in rules_of(objects(render(ENABLED))):
        kept = result_labels(parse(alert["expr"]))
        text = " ".join(alert["annotations"].values())
        used = set(re.findall(r"\$labels\.(\w+)", text))
        assert kept is None or used <= kept, f"{alert['alert']}: {used - (kept or set())}"
        assert "{{" not in text.replace("{{ $", ""), "only Prometheus templates remain"


def test_rules_say_what_the_issue_asked() -> None:
    rules = {r["alert"]: r for r in rules_of(objects(render(ENABLED)))}
    assert 'outcome="missed"' in rules["SnapreadyRestoreMissed"]["expr"]
    assert "[15m]" in rules["SnapreadyRestoreMissed"]["expr"]
    assert rules["SnapreadySnapshotsStale"]["for"] == "15m"
    assert 'outcome="restore_failed"' in rules["SnapreadyRestoreFailed"]["expr"]
    assert 'outcome="failed"' in rules["SnapreadyCheckpointFailed"]["expr"]
    assert 'state="awaiting"' in rules["SnapreadyCheckpointStalled"]["expr"]
    assert rules["SnapreadyPolicySourceNotSynced"]["for"] == "10m"
    assert rules["SnapreadyWebhookScopeNotSynced"]["for"] == "10m"
    assert rules["SnapreadyPolicySourceNotSynced"]["expr"] == "snapready_policy_source_synced == 0"
    assert rules["SnapreadyWebhookScopeNotSynced"]["expr"] == "snapready_webhook_scope_synced == 0"
    assert "< 14 * 24 * 3600" in rules["SnapreadyCertificateExpiry"]["expr"]
    assert "snapready_audit_would_deny" in rules["SnapreadyNeverJudgedWouldDeny"]["expr"]


def test_rule_labels_alert_labels_and_expiry_threshold_are_configurable() -> None:
    values = {
        "monitoring": {
            "prometheusRule": {
                "enabled": True,
                "labels": {"release": "kube-prometheus-stack"},
                "alertLabels": {"team": "platform"},
                "certificateExpiryDays": 30,
            }
        }
    }
    objs = objects(render(values))
    rule = one(objs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert rule["metadata"]["labels"]["app.kubernetes.io/name"] == "snapready"
    rules = rules_of(objs)
    assert all(r["labels"]["team"] == "platform" and r["labels"]["severity"] for r in rules)
    (expiry,) = [r for r in rules if r["alert"] == "SnapreadyCertificateExpiry"]
    assert "< 30 * 24 * 3600" in expiry["expr"]
    assert "30 days" in expiry["annotations"]["description"]


# --- schema, Kubernetes validation, lint -------------------------------------------------------


def test_monitoring_objects_are_valid_kubernetes() -> None:
    objs = objects(render(ENABLED))
    problems, skipped = validate_all(objs)
    assert problems == []
    assert "PrometheusRule" in skipped and "ConfigMap" not in skipped


def test_chart_with_monitoring_lints_clean() -> None:
    values = {
        "monitoring": {
            "grafanaDashboard": {"enabled": True, "annotations": {"grafana_folder": "x"}},
            "prometheusRule": {"enabled": True, "alertLabels": {"team": "platform"}},
        }
    }
    report = helm_python.lint(CHART, values, strict=True, namespace="snapready")
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
    assert report["errors"] == []


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"prometheusRule": {"certificateExpiryDays": 0}},
            "certificateExpiryDays",
            id="rejects-zero-expiry-days",
        ),
        pytest.param(
            {"grafanaDashboard": {"labelValue": 1}}, "labelValue", id="rejects-numeric-label-value"
        ),
        pytest.param({"prometheusRules": {}}, "prometheusRules", id="rejects-misspelt-key"),
        pytest.param(
            {"prometheusRule": {"alertLabels": {"team": 1}}}, "team", id="rejects-non-string-label"
        ),
    ],
)
def test_schema_rejects_bad_monitoring_values(values: dict[str, Any], message: str) -> None:
    with helm_python.Chart.load(CHART) as chart, pytest.raises(helm_python.HelmError) as caught:
        chart.validate_schema({"monitoring": values})
    assert message in str(caught.value)
