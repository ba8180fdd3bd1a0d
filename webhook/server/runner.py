"""Run the app under uvicorn with TLS (minimum TLS 1.2) from validated settings.

Edge module: reads certificate files, binds sockets. The admission logic lives in ``admission``.
Wires the process: uvloop + httptools with the request deadline and the drain-on-SIGTERM server
of ``shutdown``, the ``/metrics`` listener and the observer that logs and counts each admission.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from fastapi import FastAPI

from webhook.admission.engine import Engine
from webhook.admission.governance import Governance
from webhook.admission.replicas import ReplicaMemo
from webhook.base.config import Settings
from webhook.base.errors import ConfigError
from webhook.base.types import Endpoint
from webhook.cluster.files import load_policy_dir
from webhook.cluster.gcs import BucketInspector
from webhook.kube.responses import Decision
from webhook.kube.review import AdmissionReviewRequest
from webhook.server import certs
from webhook.server.app import Observer, RejectHook, create_app
from webhook.server.collectors import ControllerCollector, EventCollector, RecordWritesCollector
from webhook.server.logs import log_admission
from webhook.server.metrics import Metrics, default_metrics, serve_metrics
from webhook.server.protocol import protocol_class
from webhook.server.report_metrics import ReportCollector
from webhook.server.shutdown import GracefulServer
from webhook.server.tls import CertReloader, run_with_reloader
from webhook.snapshots.state import ClusterState

if TYPE_CHECKING:  # imported lazily at run time: file mode never loads ``kubernetes``
    from webhook.cluster.manager import Cluster

log = logging.getLogger("snapready.server")


def ensure_certificates(settings: Settings) -> None:
    """Create a local CA + serving cert when both files are missing and generation is allowed.

    Generation only happens for a ``<dir>/tls.crt`` + ``<dir>/tls.key`` pair that is missing
    entirely: one existing file is never overwritten, and other names are taken as the user's
    own files that must exist.

    Raises:
        FileNotFoundError: a file is missing and cannot be generated; the message names it.
    """
    cert, key = settings.server.cert_file, settings.server.key_file
    missing = [
        f"{label} {path}"
        for label, path in (("serving certificate", cert), ("private key", key))
        if not path.exists()
    ]
    if not missing:
        return
    what = " and ".join(missing) + (" are" if len(missing) == 2 else " is") + " missing"
    if not settings.server.generate_certs:
        raise FileNotFoundError(f"{what} (server.generate_certs is off)")
    generable = cert.parent == key.parent and (cert.name, key.name) == ("tls.crt", "tls.key")
    if len(missing) == 1 or not generable:
        raise FileNotFoundError(
            f"{what}; a local CA and serving certificate are generated only when both "
            "<dir>/tls.crt and <dir>/tls.key are missing (pass existing files otherwise)"
        )
    paths = certs.generate(cert.parent)
    log.info(
        "generated a local CA and serving certificate in %s (caBundle: %s)",
        paths.directory,
        Path(paths.ca_cert),
    )


@dataclass(frozen=True)
class PolicySource:
    """Where admission's facts come from: the engine reading them and, in cluster mode, the
    started ``Cluster`` behind it (its controllers feed the metrics; ``stop`` ends its threads).

    Attributes:
        engine: the admission engine over the source's ``ClusterState``.
        cluster: the started cluster mode (``cluster.manager``); None for policy files.
    """

    engine: Engine
    cluster: Cluster | None = None

    def stop(self) -> None:
        """Stop the cluster mode's threads, if any (idempotent)."""
        if self.cluster is not None:
            self.cluster.stop()


def open_source(settings: Settings, *, tune_heap: bool = False) -> PolicySource:
    """Load the configured policy source and return it with an engine reading it, which
    remembers pod decisions for the next replica (``admission.replicas``: its requests are
    AdmissionReview JSON).

    ``tune_heap`` (the server only): the garbage collector is tuned around the caches' first
    sync (``webhook.cluster.api.heap``).

    ``source.kind == "kube"`` starts cluster mode (background threads, ``cluster.manager``):
    the engine's state is unsynced (``/readyz`` 503) until every cache has listed once; call
    ``stop()`` on the result at shutdown.

    Raises:
        ConfigError: a malformed policy file (files), or no usable kubeconfig/in-cluster config.
    """
    # PodSnapshotPolicy/StorageConfig governance; GCS is only contacted for storage configs.
    governance = Governance(BucketInspector(settings.storage))
    if settings.source.kind == "kube":
        from webhook.cluster.manager import start_cluster  # noqa: PLC0415 - lazy kubernetes

        cluster = start_cluster(settings, tune_heap=tune_heap)
        engine = Engine(settings=settings, state=cluster.state, governance=governance)
        engine.replicas = ReplicaMemo()  # pods come from AdmissionReview JSON
        return PolicySource(engine, cluster)
    state: ClusterState = load_policy_dir(settings.source.policy_dir, prefix=settings.prefix)
    engine = Engine(settings=settings, state=lambda: state, governance=governance)
    engine.replicas = ReplicaMemo()
    return PolicySource(engine)


def build_engine(settings: Settings) -> Engine:
    """The engine of ``open_source(settings)``: for policy files (the CLI, tests), where
    nothing needs stopping. Cluster mode's threads are stopped through ``open_source``'s result.

    Raises:
        ConfigError: as ``open_source``.
    """
    return open_source(settings).engine


def uvicorn_config(
    settings: Settings,
    engine: Engine,
    app: FastAPI | None = None,
    on_reject: RejectHook | None = None,
) -> uvicorn.Config:
    """uvicorn settings: TLS files, uvloop + hardened httptools, timeouts and limits.

    ``app`` defaults to ``create_app(engine)`` without observer; ``on_reject`` counts the
    requests the protocol refuses (408, 431, and 503 at ``server.max_concurrency``).

    Raises:
        ConfigError: the certificate or key cannot be loaded (unreadable, not PEM, or a key
            that does not belong to the certificate); the message names both files.
    """
    server = settings.server
    config = uvicorn.Config(
        app if app is not None else create_app(engine),
        host=server.host,
        port=server.port,
        ssl_certfile=str(server.cert_file),
        ssl_keyfile=str(server.key_file),
        loop="uvloop",
        http=protocol_class(settings, on_reject),
        timeout_keep_alive=server.keepalive_seconds,
        limit_concurrency=server.max_concurrency,
        timeout_graceful_shutdown=int(server.graceful_timeout_seconds),
        log_config=None,
        access_log=False,
        server_header=False,
        proxy_headers=False,  # called directly by the API server: no proxy to trust
        lifespan="off",
    )
    try:
        config.load()  # builds the ssl.SSLContext: reads and checks the certificate and key
    except OSError as exc:  # ssl.SSLError is an OSError
        raise ConfigError(tls_load_error(server.cert_file, server.key_file, exc)) from None
    assert config.ssl is not None
    config.ssl.minimum_version = ssl.TLSVersion.TLSv1_2
    return config


def tls_load_error(cert: Path, key: Path, exc: OSError) -> str:
    """A one-line reason why ``cert``/``key`` could not be loaded (OpenSSL's reason code)."""
    files = f"serving certificate {cert} and key {key}"
    if isinstance(exc, ssl.SSLError):
        if exc.reason == "KEY_VALUES_MISMATCH":
            return f"{files}: certificate and key do not match"
        return f"{files}: cannot load ({exc.reason or exc}); both must be PEM files"
    return f"{files}: cannot load: {exc.strerror or exc}"


def bind_listener(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (``SO_REUSEADDR`` as uvicorn sets it).

    Bound before the server starts so that a busy port is a clear start-up error, not uvicorn's
    logged traceback and exit 3.

    Raises:
        ConfigError: the address cannot be bound (in use, not local, no permission).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def make_observer(metrics: Metrics) -> Observer:
    """The per-review observer: count in ``metrics`` and log the ``admission`` line."""

    def observe(
        endpoint: Endpoint, review: AdmissionReviewRequest, decision: Decision, seconds: float
    ) -> None:
        metrics.observe(endpoint, review, decision, seconds)
        log_admission(endpoint, review, decision, seconds)

    return observe


def watch_cluster(metrics: Metrics, source: PolicySource) -> None:
    """The gauges of ``source``'s state; in cluster mode also the controllers' counts and
    listeners (prunable snapshots, refreshes and prunes, outcomes, checkpoints, records,
    reports)."""
    cluster = source.cluster
    if cluster is None:
        metrics.watch_state(source.engine.state)
        return
    lifecycle = cluster.lifecycle
    metrics.watch_state(source.engine.state, lambda: lifecycle.prunable)
    lifecycle.on_refresh.append(metrics.outcomes.observe_refresh)
    lifecycle.on_prune.append(metrics.outcomes.observe_prune)
    cluster.restores.listeners.append(metrics.observe_restore)
    cluster.checkpoints.listeners.append(metrics.outcomes.observe_checkpoint)
    origins = cluster.origins
    metrics.registry.register(RecordWritesCollector(lambda: origins.actions))
    metrics.registry.register(ReportCollector(cluster.audit))
    metrics.registry.register(ControllerCollector(lambda: cluster.controllers))
    events = cluster.events
    metrics.registry.register(EventCollector(lambda: events.results))


def start_metrics(settings: Settings, source: PolicySource, metrics: Metrics) -> Any:
    """Wire the gauges (``watch_cluster``) and serve ``/metrics`` (None when ``metrics_port``
    is 0).

    Raises:
        ConfigError: the metrics port cannot be bound.
    """
    watch_cluster(metrics, source)
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


SWITCH_INTERVAL_S = 0.001
"""How long a thread may hold the interpreter while another waits for it (CPython's default:
5 ms). The event loop answering the API server shares the interpreter with the cache and
controller threads; a leader's pass over 20,000 pods and 5,000 snapshots holds it for tens of
ms in slices of this length, and an admission that arrives meanwhile waits up to one slice for
each time it needs the interpreter back (``make bench-scale``'s busy rounds, docs/performance.md).
At 1 ms that wait is a fifth; the extra switches cost nothing while the other threads sleep."""


def serve(settings: Settings) -> None:
    """Start the HTTPS server and block until it stops (SIGTERM/SIGINT, after the drain).

    Raises:
        ConfigError: invalid policy files, unusable certificate/key, or a port that cannot be
            bound (HTTPS or metrics).
        FileNotFoundError: certificate files missing and not generated.
    """
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    # Policy errors first: nothing is written on a bad start.
    source = open_source(settings, tune_heap=True)
    engine = source.engine
    with contextlib.ExitStack() as cleanup:  # undone in reverse order, on errors too
        cleanup.callback(source.stop)
        ensure_certificates(settings)
        metrics = default_metrics()
        app = create_app(engine, make_observer(metrics), metrics.reject)
        config = uvicorn_config(settings, engine, app, metrics.reject)
        listener = cleanup.enter_context(bind_listener(settings.server.host, settings.server.port))
        metrics_server = start_metrics(settings, source, metrics)
        if metrics_server is not None:
            cleanup.callback(metrics_server.server_close)
            cleanup.callback(metrics_server.shutdown)
        # GracefulServer logs "snapready listening on ..." once it accepts connections.
        server = GracefulServer(
            config,
            app.state.admission,
            settings.server.drain_seconds,
            listener=listener,
            # A client that never finishes the handshake is cut off like one that never sends.
            handshake_timeout=settings.server.request_timeout_seconds,
        )
        # Certificate hot reload into the live context, on the server's own event loop.
        assert config.ssl is not None
        expiry = metrics.tls_certificate_expiry.set
        reloader = CertReloader.from_settings(config.ssl, settings.server, expiry)
        run_with_reloader(server, reloader)
