"""Run the app under uvicorn with TLS (minimum TLS 1.2) from validated settings.

Edge module: reads certificate files, binds sockets. The admission logic lives in ``admission``.
Wires the process: uvloop + httptools with the request deadline and the drain-on-SIGTERM server
of ``lifecycle``, the ``/metrics`` listener and the observer that logs and counts each admission.
"""

from __future__ import annotations

import logging
import ssl
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

from webhook import certs
from webhook.admission import Engine
from webhook.app import Observer, create_app
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.gcs import BucketInspector
from webhook.governance import Governance
from webhook.lifecycle import GracefulServer, protocol_class
from webhook.logs import log_admission
from webhook.metrics import Metrics, default_metrics, serve_metrics
from webhook.responses import Decision
from webhook.review import AdmissionReviewRequest
from webhook.sources import load_policy_dir
from webhook.state import ClusterState
from webhook.tls import CertReloader, run_with_reloader
from webhook.types import Endpoint

log = logging.getLogger("snapready.server")


def ensure_certificates(settings: Settings) -> None:
    """Create a local CA + serving cert when both files are missing and generation is allowed.

    Raises:
        FileNotFoundError: files missing and ``server.generate_certs`` is false.
    """
    cert, key = settings.server.cert_file, settings.server.key_file
    if cert.exists() and key.exists():
        return
    if not settings.server.generate_certs:
        raise FileNotFoundError(f"serving certificate {cert} or key {key} is missing")
    if cert.parent != key.parent or cert.name != "tls.crt" or key.name != "tls.key":
        raise FileNotFoundError(f"cannot generate into {cert} / {key}: use <dir>/tls.crt, tls.key")
    paths = certs.generate(cert.parent)
    log.info(
        "generated a local CA and serving certificate in %s (caBundle: %s)",
        paths.directory,
        Path(paths.ca_cert),
    )


def build_engine(settings: Settings) -> Engine:
    """Load the configured policy source and return an engine reading it.

    ``source.kind == "kube"`` starts the cluster caches (background threads, see ``kube.py``):
    the engine's state is unsynced (``/readyz`` 503) until every cache has listed once. Their
    ``stop`` is kept in ``engine.extra["stop_source"]``; call ``stop_source(engine)`` at shutdown.

    Raises:
        ConfigError: a malformed policy file (files), or no usable kubeconfig/in-cluster config.
    """
    # PodSnapshotPolicy/StorageConfig governance; GCS is only contacted for storage configs.
    governance = Governance(BucketInspector(settings.storage))
    if settings.source.kind == "kube":
        from webhook.kube import open_cluster_source  # noqa: PLC0415 - import kubernetes lazily

        source = open_cluster_source(settings)
        return Engine(
            settings=settings,
            state=source.state,
            governance=governance,
            extra={"stop_source": source.stop},
        )
    state: ClusterState = load_policy_dir(settings.source.policy_dir, prefix=settings.prefix)
    return Engine(settings=settings, state=lambda: state, governance=governance)


def stop_source(engine: Engine) -> None:
    """Stop the policy source's background threads, if ``build_engine`` started any."""
    stop = engine.extra.get("stop_source")
    if callable(stop):
        stop()


def uvicorn_config(
    settings: Settings, engine: Engine, app: FastAPI | None = None
) -> uvicorn.Config:
    """uvicorn settings: TLS files, uvloop + hardened httptools, timeouts and limits.

    ``app`` defaults to ``create_app(engine)`` without observer.
    """
    server = settings.server
    config = uvicorn.Config(
        app if app is not None else create_app(engine),
        host=server.host,
        port=server.port,
        ssl_certfile=str(server.cert_file),
        ssl_keyfile=str(server.key_file),
        loop="uvloop",
        http=protocol_class(settings),
        timeout_keep_alive=server.keepalive_seconds,
        limit_concurrency=server.max_concurrency,
        timeout_graceful_shutdown=int(server.graceful_timeout_seconds),
        log_config=None,
        access_log=False,
        server_header=False,
        proxy_headers=False,  # called directly by the API server: no proxy to trust
        lifespan="off",
    )
    config.load()
    assert config.ssl is not None
    config.ssl.minimum_version = ssl.TLSVersion.TLSv1_2
    return config


def make_observer(metrics: Metrics, settings: Settings) -> Observer:
    """The per-review observer: count in ``metrics`` and log the ``admission`` line."""
    overrides = settings.rules.modes

    def observe(
        endpoint: Endpoint, review: AdmissionReviewRequest, decision: Decision, seconds: float
    ) -> None:
        metrics.observe(endpoint, review, decision, seconds, overrides)
        log_admission(endpoint, review, decision, seconds)

    return observe


def start_metrics(settings: Settings, engine: Engine, metrics: Metrics) -> Any:
    """Wire the gauges and serve ``/metrics`` (None when ``metrics_port`` is 0).

    Raises:
        ConfigError: the metrics port cannot be bound.
    """
    metrics.watch_state(engine.state)
    try:
        metrics.record_certificate(settings.server.cert_file)
    except (OSError, ValueError) as exc:
        log.warning("cannot read the serving certificate's expiry: %s", exc)
    port = settings.server.metrics_port
    if not port:
        return None
    try:
        httpd = serve_metrics(metrics, settings.server.host, port)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics on {settings.server.host}:{port}: {exc}") from exc
    log.info("metrics on http://%s:%d/metrics", settings.server.host, port)
    return httpd


def serve(settings: Settings) -> None:
    """Start the HTTPS server and block until it stops (SIGTERM/SIGINT, after the drain).

    Raises:
        ConfigError: invalid policy files or an unbindable metrics port.
        FileNotFoundError: certificate files missing and generation disabled.
    """
    engine = build_engine(settings)  # policy errors first: nothing is written on a bad start
    ensure_certificates(settings)
    metrics = default_metrics()
    app = create_app(engine, make_observer(metrics, settings), metrics.reject)
    config = uvicorn_config(settings, engine, app)
    metrics_server = start_metrics(settings, engine, metrics)
    log.info("snapready listening on https://%s:%d", settings.server.host, settings.server.port)
    try:
        server = GracefulServer(config, app.state.admission, settings.server.drain_seconds)
        # Certificate hot reload into the live context, on the server's own event loop.
        assert config.ssl is not None
        expiry = metrics.tls_certificate_expiry.set
        reloader = CertReloader.from_settings(config.ssl, settings.server, expiry)
        run_with_reloader(server, reloader)
    finally:
        stop_source(engine)
        if metrics_server is not None:
            metrics_server.shutdown()
            metrics_server.server_close()
