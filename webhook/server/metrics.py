"""Prometheus metrics: the collectors, the per-admission recorder and the plain-HTTP ``/metrics``.

Every series lives in one ``Metrics`` object with its own ``CollectorRegistry`` (tests build fresh
ones; ``serve`` uses the process-wide ``default_metrics()``). Label values are bounded: kinds
outside the dispatch table count as ``other`` and rule/mutator ids come from our own tables, so an
attacker cannot grow the series set. The per-review series are plain counts exposed at scrape
time (``admission_metrics.AdmissionCounts``): the hot path costs one lock and a few dict
increments per review.

The endpoint is served by a small threaded WSGI server on ``settings.server.metrics_port``, off
the event loop, so a scrape never delays an admission.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Container, Iterable
from pathlib import Path
from socketserver import BaseServer
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from webhook.admission.engine import DISPATCH
from webhook.base.types import Endpoint, Finding
from webhook.kube.responses import Decision
from webhook.kube.review import AdmissionReviewRequest
from webhook.server import certs
from webhook.server.admission_metrics import AdmissionCounts
from webhook.server.collectors import SnapshotCollector, SourceApiCollector
from webhook.server.logs import decision_label
from webhook.server.outcome_metrics import OutcomeMetrics
from webhook.snapshots.outcomes import Verdict
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.state import ClusterState

DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Seconds. 0.5 ms resolves the fast path; 2.5 s is far past any healthy answer (the API server's
webhook timeout defaults to 10 s, max 30 s)."""
KNOWN_KINDS = frozenset(kind for _, kind in DISPATCH)
SCRAPE_SOCKET_TIMEOUT = 10.0
"""Seconds a scrape connection may stay silent: a slow client cannot pin a thread forever."""


class Metrics:
    """All snapready series in one registry.

    Attributes:
        registry: where the series are registered (exposed by ``serve_metrics``).
        tls_certificate_expiry: ``notAfter`` of the serving certificate, Unix seconds; set by
            ``record_certificate`` at start-up and by the certificate reloader.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        reg = self.registry
        self.admissions = AdmissionCounts(DURATION_BUCKETS)
        """The per-review series: requests, durations, findings, mutations, internal errors."""
        reg.register(self.admissions)
        self.policy_source_synced = Gauge(
            "snapready_policy_source_synced",
            "1 when the policy source has delivered its first full list (readiness), else 0.",
            registry=reg,
        )
        self.outcomes = OutcomeMetrics(reg)
        self.restores = self.outcomes.restores
        self.pod_startup = self.outcomes.pod_startup
        self.webhook_scope_synced = Gauge(
            "snapready_webhook_scope_synced",
            "1 when the webhook configurations carry the matchConditions scope the current "
            "PodSnapshotPolicies imply (cluster mode), else 0 (also in file mode).",
            registry=reg,
        )
        self.tls_certificate_expiry = Gauge(
            "snapready_tls_certificate_expiry_timestamp_seconds",
            "notAfter of the serving certificate in use, as a Unix timestamp.",
            registry=reg,
        )
        self.rejected = Counter(
            "snapready_rejected_requests",
            "Requests refused before admission, by endpoint (mutate, validate, other, unknown "
            "before the path arrived) and HTTP status: 400 broken body or two Content-Type "
            "headers, 413 body too large, 415 content type not application/json, 503 body "
            "budget or connection limit reached, 408 request not complete within the request "
            "timeout (also when nothing could be answered), 431 request head too large.",
            ["endpoint", "code"],
            registry=reg,
        )
        self._children: dict[tuple[Any, ...], Any] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        """The labelled child of ``metric``, cached (``labels()`` validates on every call)."""
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def watch_state(
        self,
        state: Callable[[], ClusterState],
        prunable: Callable[[], Container[tuple[str, str]]] = lambda: (),
    ) -> None:
        """Make the source gauges (synced, APIs served, snapshots by state) read ``state()``
        (and the lifecycle worker's ``prunable`` keys) at scrape time."""
        self.policy_source_synced.set_function(lambda: 1.0 if state().synced else 0.0)
        if state().scope_synced is not None:
            self.webhook_scope_synced.set_function(lambda: 1.0 if state().scope_synced else 0.0)
        self.registry.register(SourceApiCollector(state))
        self.registry.register(SnapshotCollector(state, prunable))

    def observe_restore(self, record: PodRecord, verdict: Verdict) -> None:
        """Count one restore outcome and its times (``OutcomeMetrics.observe_restore``)."""
        self.outcomes.observe_restore(record, verdict)

    def record_certificate(self, cert_file: Path) -> None:
        """Set the expiry gauge from the PEM ``cert_file``.

        Raises:
            OSError, ValueError: unreadable file or no PEM certificate in it.
        """
        self.tls_certificate_expiry.set(certs.certificate_not_after(cert_file))

    def observe(
        self,
        endpoint: Endpoint,
        review: AdmissionReviewRequest,
        decision: Decision,
        seconds: float,
    ) -> None:
        """Count one answered review (the ``Observer`` contract of ``webhook.server.app``).

        ``decision.audit`` may hold ``findings`` (``Finding`` list) with their ``outcomes``,
        ``mutators`` (names of mutators that changed the pod) and ``internal_error``; each is
        optional. A finding counts under the outcome ``admission.decision.decide_findings``
        recorded: ``enforce`` (denied), ``warn`` (a warning) or ``audit`` (only recorded).
        """
        request = review.request
        kind = request.kind.kind if request.kind.kind in KNOWN_KINDS else "other"
        label = decision_label(decision)
        audit = decision.audit
        if not audit:
            self.admissions.add((endpoint, kind, request.operation, label), seconds)
            return
        mutators = audit.get("mutators")
        self.admissions.add(
            (endpoint, kind, request.operation, label),
            seconds,
            _finding_labels(audit.get("findings"), audit.get("outcomes")),
            [str(name) for name in mutators] if isinstance(mutators, list | tuple) else (),
            internal_error=label == "error",
        )

    def reject(self, endpoint: str, code: int) -> None:
        """Count a request refused before admission with HTTP ``code``.

        ``endpoint`` must come from a fixed set (the app's ``mutate``/``validate``, the
        protocol's ``other``/``unknown``): it becomes a label value.
        """
        self._child(self.rejected, endpoint, str(code)).inc()


def _finding_labels(findings: Any, outcomes: Any) -> list[tuple[str, str]]:
    """``(rule, outcome)`` of each finding, with the outcome ``admission.decision.decide_findings``
    recorded for it."""
    if not isinstance(findings, list) or not isinstance(outcomes, list):
        return []
    return [
        (finding.rule, str(outcome))
        for finding, outcome in zip(findings, outcomes, strict=False)
        if isinstance(finding, Finding)
    ]


_default: Metrics | None = None
_default_lock = threading.Lock()


def default_metrics() -> Metrics:
    """The process-wide ``Metrics`` used by ``snapready serve`` (created on first use)."""
    global _default  # noqa: PLW0603 - one registry per process, like prometheus_client's REGISTRY
    with _default_lock:
        if _default is None:
            _default = Metrics()
        return _default


class _Handler(WSGIRequestHandler):
    """No access log per scrape; a socket timeout so a silent client frees its thread."""

    timeout = SCRAPE_SOCKET_TIMEOUT

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged."""


def metrics_wsgi_app(registry: CollectorRegistry) -> Callable[..., Iterable[bytes]]:
    """WSGI app serving the exposition format on ``/metrics`` only (404 elsewhere)."""
    exposition = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: metrics are served on /metrics\n"]
        served: Iterable[bytes] = exposition(environ, start_response)
        return served

    return app


def serve_metrics(metrics: Metrics, host: str, port: int) -> BaseServer:
    """Serve ``/metrics`` over plain HTTP on ``host:port`` in a daemon thread.

    Returns the server; call ``shutdown()`` then ``server_close()`` to stop it.

    Raises:
        OSError: the port cannot be bound.
    """
    httpd: WSGIServer = make_server(
        host,
        port,
        metrics_wsgi_app(metrics.registry),
        ThreadingWSGIServer,
        handler_class=_Handler,
    )
    thread = threading.Thread(target=httpd.serve_forever, name="metrics", daemon=True)
    thread.start()
    return httpd
