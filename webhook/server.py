"""Run the app under uvicorn with TLS (minimum TLS 1.2) from validated settings.

Edge module: reads certificate files, binds sockets. The admission logic lives in ``admission``.
"""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import uvicorn

from webhook import certs
from webhook.admission import Engine
from webhook.app import create_app
from webhook.config import Settings
from webhook.sources import load_policy_dir
from webhook.state import ClusterState

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

    Raises:
        ConfigError: a malformed policy file (file source).
    """
    state: ClusterState = load_policy_dir(settings.source.policy_dir, prefix=settings.prefix)
    return Engine(settings=settings, state=lambda: state)


def uvicorn_config(settings: Settings, engine: Engine) -> uvicorn.Config:
    """uvicorn settings: TLS files, timeouts and limits from ``settings.server``."""
    server = settings.server
    config = uvicorn.Config(
        create_app(engine),
        host=server.host,
        port=server.port,
        ssl_certfile=str(server.cert_file),
        ssl_keyfile=str(server.key_file),
        timeout_keep_alive=server.keepalive_seconds,
        limit_concurrency=server.max_concurrency,
        timeout_graceful_shutdown=int(server.graceful_timeout_seconds),
        log_config=None,
        access_log=False,
        server_header=False,
        lifespan="off",
    )
    config.load()
    assert config.ssl is not None
    config.ssl.minimum_version = ssl.TLSVersion.TLSv1_2
    return config


def serve(settings: Settings) -> None:
    """Start the HTTPS server and block until it stops (SIGTERM/SIGINT)."""
    engine = build_engine(settings)  # policy errors first: nothing is written on a bad start
    ensure_certificates(settings)
    config = uvicorn_config(settings, engine)
    log.info("snapready listening on https://%s:%d", settings.server.host, settings.server.port)
    uvicorn.Server(config).run()
