"""A second mutating webhook that runs after snapready: a tiny HTTPS server and its registration.

Pods reach it only when labelled ``e2e.snapready.test/later`` (``objectSelector``), and the label
value picks what it does, like three kinds of real webhooks:

* ``volume`` (a sidecar-style injector): adds an emptyDir volume ``cache`` and mounts it at
  ``/cache`` in container 0: both hashed fields. ``reinvocationPolicy: Never``.
* ``image`` (a policy engine / registry mirror): rewrites the image of snapready's injected
  ``snapready-helpers`` init container to :data:`MIRROR_IMAGE`. ``reinvocationPolicy: Never``.
* ``drift`` (a webhook that keeps changing the pod): adds ``cache`` on its first call and
  ``cache-2`` when re-invoked, i.e. after snapready's own re-invocation, so the final pod no
  longer matches its ``spec-hash``. ``reinvocationPolicy: IfNeeded``.

The configuration is named ``zz-e2e-later-<instance>``: the API server calls mutating webhooks in
the order of their configuration names, so it runs after ``snapready-<instance>``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.support import kube_raw
from tests.support.kube_raw import Obj
from tests.support.snapready_proc import ca_bundle, generate_certs

LABEL = "e2e.snapready.test/later"
MIRROR_IMAGE = "mirror.example.com/snapready/helpers@sha256:" + "7a" * 32
HELPERS = "snapready-helpers"


def cache_volume(name: str) -> Obj:
    """The emptyDir volume the ``volume``/``drift`` modes add."""
    return {"name": name, "emptyDir": {}}


def patch_for(mode: str, pod: Obj) -> list[Obj]:
    """The JSON Patch this webhook answers for ``pod`` in ``mode``."""
    spec = pod["spec"]
    volumes = [volume["name"] for volume in spec.get("volumes", [])]
    if mode in {"volume", "drift"}:
        name = "cache" if "cache" not in volumes else "cache-2"
        if mode == "volume" and name != "cache":
            return []
        ops: list[Obj] = [
            {"op": "add", "path": "/spec/volumes/-", "value": cache_volume(name)}
            if volumes
            else {"op": "add", "path": "/spec/volumes", "value": [cache_volume(name)]}
        ]
        mount = {"name": name, "mountPath": f"/{name}"}
        if spec["containers"][0].get("volumeMounts"):
            ops.append({"op": "add", "path": "/spec/containers/0/volumeMounts/-", "value": mount})
        else:
            ops.append({"op": "add", "path": "/spec/containers/0/volumeMounts", "value": [mount]})
        return ops
    if mode == "image":
        for index, container in enumerate(spec.get("initContainers", [])):
            if container["name"] == HELPERS and container.get("image") != MIRROR_IMAGE:
                path = f"/spec/initContainers/{index}/image"
                return [{"op": "replace", "path": path, "value": MIRROR_IMAGE}]
    return []


@dataclass
class LaterWebhook:
    """The running server: its URL, CA, and every call it answered."""

    url: str
    ca_bundle: str
    calls: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.calls.append(entry)

    def calls_for(self, name: str) -> list[dict[str, Any]]:
        """The calls for the pod named (or generate-named) ``name``."""
        with self.lock:
            return [call for call in self.calls if call["name"] == name]


def _handler(hook: LaterWebhook) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            request = review["request"]
            pod = request["object"]
            mode = pod["metadata"].get("labels", {}).get(LABEL, "")
            ops = patch_for(mode, pod)
            hook.record(
                {
                    "name": pod["metadata"].get("name") or pod["metadata"].get("generateName"),
                    "mode": mode,
                    "ops": ops,
                    "initContainers": [c["name"] for c in pod["spec"].get("initContainers", [])],
                }
            )
            response: Obj = {"uid": request["uid"], "allowed": True}
            if ops:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
            body = json.dumps(
                {
                    "apiVersion": review["apiVersion"],
                    "kind": "AdmissionReview",
                    "response": response,
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def configuration(name: str, hook: LaterWebhook, scope: dict[str, str]) -> Obj:
    """The MutatingWebhookConfiguration: two webhooks (Never / IfNeeded) on pod CREATE."""

    def webhook(webhook_name: str, modes: list[str], reinvocation: str) -> Obj:
        return {
            "name": webhook_name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "timeoutSeconds": 5,
            "failurePolicy": "Fail",
            "reinvocationPolicy": reinvocation,
            "clientConfig": {"url": f"{hook.url}/mutate", "caBundle": hook.ca_bundle},
            "namespaceSelector": {"matchLabels": scope},
            "objectSelector": {
                "matchExpressions": [{"key": LABEL, "operator": "In", "values": modes}]
            },
            "rules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["pods"],
                    "operations": ["CREATE"],
                    "scope": "Namespaced",
                }
            ],
        }

    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            webhook("later.e2e.snapready.test", ["volume", "image"], "Never"),
            webhook("drift.e2e.snapready.test", ["drift"], "IfNeeded"),
        ],
    }


@contextlib.contextmanager
def later_webhook(
    api: client.ApiClient, workdir: Path, instance: str, scope: dict[str, str]
) -> Iterator[LaterWebhook]:
    """Serve the webhook on 127.0.0.1 (own CA) and register it for ``scope`` namespaces;
    unregister and stop on exit."""
    cert_dir = generate_certs(workdir)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    hook = LaterWebhook(f"https://127.0.0.1:{server.server_address[1]}", ca_bundle(cert_dir))
    server.RequestHandlerClass = _handler(hook)
    thread = threading.Thread(target=server.serve_forever, name="later-webhook", daemon=True)
    thread.start()
    body = configuration(f"zz-e2e-later-{instance}", hook, scope)
    try:
        reply = kube_raw.create(api, body)
        assert reply.ok, reply.body
        yield hook
    finally:
        kube_raw.delete(api, body)
        server.shutdown()
        server.server_close()
        thread.join(5)
