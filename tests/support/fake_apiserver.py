"""A local HTTP server that replays the Kubernetes API's real JSON, for the cluster-cache tests.

Serves the captures in ``tests/data/kube-api/`` (copies of ``../shared/data/kube-api/``, recorded
from a Kubernetes 1.36 API server): list responses, ``/version``, and the exact 404 body of an API
group that is not served. Watches (``?watch=true``) are chunked streams, one JSON event per line
as the API server sends them, fed from a per-path queue the test fills (``push``, ``push_file``)
and ended with ``drop`` (a dropped connection) or at the request's ``timeoutSeconds``.
Every request is recorded (path, query, Authorization header present) for assertions; ``hold``
parks requests of a path (a slow or stuck API server) until ``release``; ``fail_next`` answers the
next request of a path with a given status and body.
"""

from __future__ import annotations

import copy
import json
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

KUBE_API = Path(__file__).resolve().parents[1] / "data" / "kube-api"
POLICIES = "/apis/podsnapshot.gke.io/v1/podsnapshotpolicies"
POLICIES_V1ALPHA1 = "/apis/podsnapshot.gke.io/v1alpha1/podsnapshotpolicies"
STORAGE_CONFIGS = "/apis/podsnapshot.gke.io/v1/podsnapshotstorageconfigs"
NAMESPACES = "/api/v1/namespaces"
NODES = "/api/v1/nodes"
COMPUTE_CLASSES = "/apis/cloud.google.com/v1/computeclasses"
VERSION = "/version"
DROP = object()
"""Queue item that ends the current watch stream cleanly (the server closed it)."""
CUT = object()
"""Queue item that cuts the current watch stream mid-chunk-stream (a broken connection)."""


def load(name: str) -> Any:
    """A capture from ``tests/data/kube-api`` decoded from JSON."""
    return json.loads((KUBE_API / name).read_text())


def load_events(name: str) -> list[dict[str, Any]]:
    """The events of a captured watch stream (``*.jsonl``), one per line."""
    lines = (KUBE_API / name).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def default_routes() -> dict[str, Any]:
    """Path -> JSON body served for GET: every capture, ComputeClasses left unserved."""
    return {
        POLICIES: load("podsnapshotpolicies-list.json"),
        STORAGE_CONFIGS: load("podsnapshotstorageconfigs-list.json"),
        NAMESPACES: load("namespaces-list.json"),
        NODES: load("nodes-list.json"),
        VERSION: load("version-gke.json"),
    }


@dataclass(frozen=True)
class Seen:
    """One request the server received."""

    path: str
    query: dict[str, str]
    authorized: bool

    @property
    def watch(self) -> bool:
        """Whether this was a watch request."""
        return self.query.get("watch") in ("true", "1")


class FakeApiServer:
    """The fake API server; use as a context manager or call ``start``/``stop``."""

    def __init__(self, routes: dict[str, Any] | None = None) -> None:
        self.routes = default_routes() if routes is None else routes
        self.not_found_body = (KUBE_API / "computeclasses-404.json").read_bytes()
        self.seen: list[Seen] = []
        self._watches: dict[str, queue.Queue[object]] = {}
        self._faults: dict[str, list[tuple[int, bytes]]] = {}
        self._held: dict[str, threading.Event] = {}
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> FakeApiServer:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """End every stream and stop serving."""
        self._stopping.set()
        for event in list(self._held.values()):
            event.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kubeconfig(self, directory: Path, token: str = "fake-token") -> Path:
        """Write a kubeconfig pointing at this server with a bearer token; returns its path."""
        path = directory / "kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config))
        return path

    def push(self, path: str, *events: dict[str, Any]) -> None:
        """Queue watch events for ``path`` (sent in order on the open or next watch)."""
        for event in events:
            self._queue(path).put(copy.deepcopy(event))

    def drop(self, path: str, *, abrupt: bool = False) -> None:
        """End the current watch of ``path`` after the queued events: cleanly, or ``abrupt``ly
        (no final chunk, the client sees a broken connection)."""
        self._queue(path).put(CUT if abrupt else DROP)

    def fail_next(self, path: str, status: int, body: bytes) -> None:
        """Answer the next request of ``path`` with ``status`` and ``body`` (JSON or text)."""
        self._faults.setdefault(path, []).append((status, body))

    def hold(self, path: str) -> None:
        """Park every request of ``path`` until ``release(path)``."""
        self._held[path] = threading.Event()

    def release(self, path: str) -> None:
        """Let parked requests of ``path`` proceed."""
        event = self._held.pop(path, None)
        if event is not None:
            event.set()

    def requests(self, path: str, *, watch: bool | None = None) -> list[Seen]:
        """Requests received for ``path`` (only watches, only lists, or both)."""
        return [s for s in list(self.seen) if s.path == path and watch in (None, s.watch)]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Poll ``predicate`` until true; AssertionError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met after {timeout}s; seen: {self.seen}")
            time.sleep(0.01)

    def _queue(self, path: str) -> queue.Queue[object]:
        with self._lock:
            return self._watches.setdefault(path, queue.Queue())

    def _take_fault(self, path: str) -> tuple[int, bytes] | None:
        faults = self._faults.get(path)
        return faults.pop(0) if faults else None

    def _stream(self, path: str, timeout: float) -> Iterator[bytes | None]:
        """Event lines for one watch until DROP, ``timeout`` or server stop; None for CUT."""
        events = self._queue(path)
        deadline = time.monotonic() + timeout
        while not self._stopping.is_set() and time.monotonic() < deadline:
            try:
                item = events.get(timeout=0.02)
            except queue.Empty:
                continue
            if item is DROP:
                return
            if item is CUT:
                yield None
                return
            yield json.dumps(item).encode() + b"\n"


def _handler_for(server: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the request log is ``server.seen``."""

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = dict(parse_qsl(url.query))
            seen = Seen(url.path, query, self.headers.get("Authorization") is not None)
            server.seen.append(seen)
            held = server._held.get(url.path)
            if held is not None:
                held.wait()
            fault = server._take_fault(url.path)
            if fault is not None:
                self._send(fault[0], fault[1])
            elif url.path not in server.routes:
                self._send(404, server.not_found_body, "text/plain; charset=utf-8")
            elif seen.watch:
                self._watch(url.path, float(query.get("timeoutSeconds", "300")))
            else:
                self._send(200, json.dumps(server.routes[url.path]).encode())

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _watch(self, path: str, timeout: float) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            try:
                for line in server._stream(path, timeout):
                    if line is None:
                        self.close_connection = True
                        return
                    self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass  # the client went away (stop() or a reconnect): nothing to finish
            self.close_connection = True

    return Handler


def with_resource_version(event: dict[str, Any], version: str) -> dict[str, Any]:
    """A copy of ``event`` whose object carries ``metadata.resourceVersion = version``."""
    copied = copy.deepcopy(event)
    copied["object"].setdefault("metadata", {})["resourceVersion"] = version
    return copied


def items_named(document: dict[str, Any], names: Iterable[str]) -> list[dict[str, Any]]:
    """The items of a list document whose ``metadata.name`` is in ``names`` (deep copies)."""
    wanted = set(names)
    return [copy.deepcopy(i) for i in document["items"] if i["metadata"]["name"] in wanted]
