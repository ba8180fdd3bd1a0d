"""The chart on GKE's monitoring (issue 36): a ``PodMonitoring`` (``monitoring.googleapis.com/v1``,
GKE Managed Prometheus) beside the ServiceMonitor, off by default; and NOTES that say nothing of
helper images when injection is off.

kubernetes-validate has no schema for PodMonitoring (a CRD of GoogleCloudPlatform/prometheus-engine
that GKE installs with managed collection), so its fields are checked here against what that
CRD's v1 schema requires and allows: ``spec.selector`` and ``spec.endpoints`` required, each
endpoint a ``port`` (name or number of a container port) with optional ``path``, ``scheme``,
``interval`` (a Prometheus duration) and ``timeout``.
"""

from __future__ import annotations

import re
from typing import Any

import helm_python
import pytest

from tests.support.helm_support import CHART, by_kind, objects, one, render

GMP_SPEC_FIELDS = {"selector", "endpoints", "targetLabels", "limits", "filterRunning"}
GMP_ENDPOINT_FIELDS = {
    "port", "path", "scheme", "interval", "timeout", "params", "proxyUrl", "metricRelabeling",
    "authorization", "basicAuth", "oauth2", "tls",
}  # fmt: skip
PROMETHEUS_DURATION = re.compile(
    r"^((\d+)y)?((\d+)w)?((\d+)d)?((\d+)h)?((\d+)m)?((\d+)s)?((\d+)ms)?$"
)
"""Prometheus' duration syntax (``model.ParseDuration``), which the CRD's ``interval`` needs."""


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def test_pod_monitoring_is_off_by_default() -> None:
    assert by_kind(objects(render()), "PodMonitoring") == []


def test_pod_monitoring_scrapes_the_metrics_port_of_the_webhook_pods() -> None:
    values = {"metrics": {"podMonitoring": {"enabled": True, "interval": "15s"}}}
    objs = objects(render(values, name="prod", namespace="webhooks"))
    monitor = one(objs, "PodMonitoring")
    assert monitor["apiVersion"] == "monitoring.googleapis.com/v1"
    assert monitor["metadata"]["namespace"] == "webhooks"  # PodMonitoring selects in its namespace
    spec: dict[str, Any] = monitor["spec"]
    assert {"selector", "endpoints"} <= set(spec) <= GMP_SPEC_FIELDS
    template = one(objs, "Deployment")["spec"]["template"]
    assert _matches(spec["selector"]["matchLabels"], template["metadata"]["labels"])
    (endpoint,) = spec["endpoints"]
    assert set(endpoint) <= GMP_ENDPOINT_FIELDS
    (container,) = [c for c in template["spec"]["containers"] if c["name"] != "snapready-helpers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert endpoint["port"] in ports
    settings_port = ports[endpoint["port"]]
    assert settings_port == 8080  # metrics.port: the plain-HTTP /metrics listener
    assert (endpoint["path"], endpoint["scheme"], endpoint["interval"]) == (
        "/metrics",
        "http",
        "15s",
    )
    assert PROMETHEUS_DURATION.match(endpoint["interval"])


def test_pod_monitoring_and_service_monitor_can_be_on_together() -> None:
    values = {
        "metrics": {
            "serviceMonitor": {"enabled": True},
            "podMonitoring": {"enabled": True, "labels": {"team": "platform"}},
        }
    }
    objs = objects(render(values))
    assert one(objs, "ServiceMonitor")["spec"]["endpoints"][0]["port"] == "metrics"
    monitor = one(objs, "PodMonitoring")
    assert monitor["metadata"]["labels"]["team"] == "platform"
    assert monitor["metadata"]["labels"]["app.kubernetes.io/name"] == "snapready"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"interval": "soon"}, "interval", id="rejects-an-interval-that-is-no-duration"
        ),
        pytest.param({"enable": True}, "enable", id="rejects-a-misspelt-key"),
        pytest.param({"labels": {"team": 1}}, "team", id="rejects-a-label-that-is-no-string"),
    ],
)
def test_schema_rejects_bad_pod_monitoring_values(values: dict[str, Any], message: str) -> None:
    with helm_python.Chart.load(CHART) as chart, pytest.raises(helm_python.HelmError) as caught:
        chart.validate_schema({"metrics": {"podMonitoring": values}})
    assert message in str(caught.value)


def test_notes_say_nothing_of_helper_images_when_injection_is_off() -> None:
    notes = render()["snapready/templates/NOTES.txt"]
    assert "injectHelpers=false" in notes
    assert "WARNING" not in notes and "helpersImage" not in notes and "placeholder" not in notes


def test_notes_name_the_helpers_image_when_injection_is_on() -> None:
    digest = "sha256:" + "ab" * 32
    notes = render({"injectHelpers": True, "helpersImage": {"digest": digest}})[
        "snapready/templates/NOTES.txt"
    ]
    assert (
        f"Helper injection: on, helpers sidecar image ghcr.io/snapready/helpers:0.1.0@{digest}"
        in notes
    )
