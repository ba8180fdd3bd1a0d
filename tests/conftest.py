"""Shared fixtures: captured reviews, settings/engine builders and a real HTTPS ``snapready serve``.

The captured AdmissionReviews in ``tests/data/reviews/`` are copies of ``../shared/data/reviews/``
(real requests from a Kubernetes 1.36 API server), kept in the repo so the suite is self-contained.
"""

from __future__ import annotations

import copy
import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, settings

from tests.support.gcs_emulator import FakeGcs, running_fake_gcs
from tests.support.ports import free_port
from webhook.admission.engine import Engine
from webhook.base.config import Settings, SourceSettings
from webhook.server import certs
from webhook.server.runner import build_engine

pytest_plugins = ["tests.envtest.plugin", "tests.support.identity"]

# Application Default Credentials must never probe the GCE metadata server (169.254.169.254) from
# tests: a PodSnapshotStorageConfig admission without STORAGE_EMULATOR_HOST looks for ADC.
# google-auth reads these when it first imports its compute_engine module (lazily, on the first
# ADC lookup); subprocess servers inherit them through os.environ.
os.environ.setdefault("NO_GCE_CHECK", "true")
os.environ.setdefault("GCE_METADATA_HOST", "127.0.0.1:9")
os.environ.setdefault("GCE_METADATA_IP", "127.0.0.1:9")

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
REVIEWS = DATA / "reviews"
EXAMPLES = ROOT / "manifests" / "examples"

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "fuzz", max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def review_files() -> list[Path]:
    """Every captured AdmissionReview file, sorted by name."""
    return sorted(REVIEWS.glob("*.json"))


def load_review(name: str) -> dict[str, Any]:
    """A deep copy of a captured review by file name prefix (``"03"``) or full name."""
    matches = [p for p in review_files() if p.name == name or p.name.startswith(f"{name}-")]
    assert len(matches) == 1, f"no unique review named {name!r}"
    loaded: dict[str, Any] = json.loads(matches[0].read_text())
    return copy.deepcopy(loaded)


def make_settings(**overrides: Any) -> Settings:
    """Settings with the example policies and no env/file influence."""
    source = SourceSettings(**{"policy_dir": EXAMPLES, **overrides.pop("source", {})})
    return Settings(source=source, **overrides)


@pytest.fixture
def engine() -> Engine:
    """An engine over the example policies (``llm-policy`` selects ``app=llm`` in ``snap``)."""
    return build_engine(make_settings())


def ssl_context(ca_file: Path) -> ssl.SSLContext:
    """A client TLS context trusting only ``ca_file`` (hostname checking on)."""
    return ssl.create_default_context(cafile=str(ca_file))


@dataclass
class RunningServer:
    """A ``snapready serve`` subprocess and how to reach it."""

    process: subprocess.Popen[bytes]
    base_url: str
    ca_file: Path
    cert_dir: Path
    log_file: Path

    def client(self, **kwargs: Any) -> httpx.Client:
        """An httpx client that verifies the generated CA."""
        return httpx.Client(
            base_url=self.base_url, verify=ssl_context(self.ca_file), timeout=10, **kwargs
        )

    def log(self) -> str:
        """Everything the server wrote so far."""
        return self.log_file.read_text(errors="replace")


def start_server(
    tmp: Path,
    *extra_args: str,
    env: dict[str, str] | None = None,
    policy_dir: Path = EXAMPLES,
    wait: bool = True,
) -> RunningServer:
    """Start ``python -m webhook serve`` on a free port with a fresh CA; wait for ``/readyz``.

    Raises:
        RuntimeError: the server did not become ready within 20 s (its log is in the message).
    """
    cert_dir = tmp / "certs"
    if not (cert_dir / "tls.key").exists():
        certs.generate(cert_dir)
    port = free_port()
    log_file = tmp / "serve.log"
    # Metrics off unless a test asks for a port (parallel servers would race for 8080), and no
    # shutdown drain unless a test asks for one (it would add 5 s to every stop_server).
    test_defaults = {"SNAPREADY_SERVER__METRICS_PORT": "0", "SNAPREADY_SERVER__DRAIN_SECONDS": "0"}
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **test_defaults, **(env or {})}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "webhook",
            "serve",
            "--port",
            str(port),
            "--cert-file",
            str(cert_dir / "tls.crt"),
            "--key-file",
            str(cert_dir / "tls.key"),
            "--policies",
            str(policy_dir),
            *extra_args,
        ],
        stdout=log_file.open("wb"),
        stderr=subprocess.STDOUT,
        env=full_env,
        cwd=tmp,
    )
    server = RunningServer(
        process, f"https://127.0.0.1:{port}", cert_dir / "ca.crt", cert_dir, log_file
    )
    if wait:
        wait_ready(server)
    return server


def wait_ready(server: RunningServer, timeout: float = 20.0) -> None:
    """Poll ``/readyz`` until 200, or raise with the server log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited {server.process.returncode}:\n{server.log()}")
        try:
            with server.client() as client:
                if client.get("/readyz").status_code == 200:
                    return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server not ready after {timeout}s:\n{server.log()}")


def stop_server(server: RunningServer) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    if server.process.poll() is None:
        server.process.terminate()
        try:
            server.process.wait(10)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


@pytest.fixture(scope="module")
def https_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One real ``snapready serve`` per test module, over the example policies."""
    server = start_server(tmp_path_factory.mktemp("serve"))
    yield server
    stop_server(server)


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., RunningServer]]:
    """Start servers with custom arguments/env; all are stopped after the test."""
    started: list[RunningServer] = []

    def factory(*args: str, env: dict[str, str] | None = None, **kwargs: Any) -> RunningServer:
        sub = tmp_path / f"server{len(started)}"
        sub.mkdir()
        server = start_server(sub, *args, env=env, **kwargs)
        started.append(server)
        return server

    yield factory
    for server in started:
        stop_server(server)


@pytest.fixture(scope="session")
def fake_gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGcs]:
    """A real GCS emulator (fake-gcs-server, buckets in US-CENTRAL1) for the session."""
    with running_fake_gcs(tmp_path_factory.mktemp("fake-gcs")) as server:
        yield server
