"""JSON requests to a control plane's API server, and the set-up every cluster benchmark needs.

One urllib3 pool of keep-alive connections with the admin client certificate, shared by the
benchmark's threads (``block=True``: a thread waits for a free connection); raw JSON both ways, no
typed client in the measured path. Set-up: GKE's snapshot CRDs (Established), the gVisor
RuntimeClass, and waiting for namespaces' ``default`` ServiceAccount (the ServiceAccount admission
plugin refuses pods before it exists).
"""

from __future__ import annotations

import json
import time
from functools import partial

import urllib3

from bench.harness.objects import RUNTIME_CLASS, Obj, crds
from bench.harness.plane import BenchError, wait
from tests.envtest.controlplane import ControlPlane

SNAPSHOT_API = "/apis/podsnapshot.gke.io/v1"
RETRIED = (429, 500, 502, 503, 504)
CORE = {"Namespace": "namespaces", "Node": "nodes", "Pod": "pods"}
GROUPS = {
    "RuntimeClass": "/apis/node.k8s.io/v1",
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1",
    "ServiceAccount": "/api/v1",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1",
    "Role": "/apis/rbac.authorization.k8s.io/v1",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1",
    "SnapshotRecord": "/apis/snapready.io/v1alpha1",
}
PLURALS = {"PodSnapshotPolicy": "podsnapshotpolicies", "RuntimeClass": "runtimeclasses"}


class Api:
    """JSON requests to the API server over ``size`` keep-alive connections; connection errors,
    429 and 5xx are retried ``retries`` times (0: a measured request is never retried). As admin,
    or with ``gke`` as GKE's snapshot controller (GKE's guard lets only it write PodSnapshots)."""

    def __init__(
        self,
        plane: ControlPlane,
        size: int,
        *,
        retries: int = 0,
        read_timeout: float = 30.0,
        gke: bool = False,
    ) -> None:
        host, port = plane.url.removeprefix("https://").split(":")
        self.retries = retries
        self.pool = urllib3.HTTPSConnectionPool(
            host,
            int(port),
            maxsize=size,
            block=True,
            ssl_context=plane.gke_ssl_context() if gke else plane.ssl_context(),
            retries=False,
            timeout=urllib3.Timeout(connect=5 if not retries else 10, read=read_timeout),
        )

    def call(
        self, method: str, path: str, body: Obj | bytes | None = None, *, patch: bool = False
    ) -> tuple[int, bytes]:
        """(status, body) of one request."""
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        content = "application/merge-patch+json" if patch else "application/json"
        headers = {"Content-Type": content, "Accept": "application/json"}
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self.pool.request(method, path, body=data, headers=headers)
            except urllib3.exceptions.HTTPError:
                if last:
                    raise
            else:
                if response.status not in RETRIED or last:
                    return int(response.status), bytes(response.data)
            time.sleep(0.25 * (attempt + 1))
        raise AssertionError("unreachable")

    def json(
        self,
        method: str,
        path: str,
        body: Obj | None = None,
        *,
        ok: tuple[int, ...] = (),
        patch: bool = False,
    ) -> Obj:
        """The decoded answer; :class:`BenchError` on a status outside 2xx and ``ok``."""
        status, data = self.call(method, path, body, patch=patch)
        if not (200 <= status < 300 or status in ok):
            raise BenchError(f"{method} {path}: HTTP {status}: {data[:500]!r}")
        decoded: Obj = json.loads(data) if data else {}
        return decoded

    def exists(self, path: str) -> bool:
        """Whether GET ``path`` answers 200."""
        return self.call("GET", path)[0] == 200

    def empty(self, path: str) -> bool:
        """Whether the list at ``path`` has no items."""
        return not self.json("GET", path)["items"]

    def close(self) -> None:
        self.pool.close()


def collection(obj: Obj) -> str:
    """The collection path ``obj`` is created in (the kinds the benchmarks create)."""
    kind, namespace = obj["kind"], obj["metadata"].get("namespace")
    if kind in CORE:
        base, plural = "/api/v1", CORE[kind]
    else:
        base = GROUPS.get(kind, SNAPSHOT_API)
        plural = PLURALS.get(kind, kind.lower() + "s")
    return f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"


def create(api: Api, obj: Obj, status: Obj | None = None) -> None:
    """Create ``obj`` (an existing one, or a retried POST that found it, is left as it is);
    then merge-patch ``status`` through the status subresource."""
    path = collection(obj)
    api.json("POST", path, obj, ok=(409,))
    if status is not None:
        api.json("PATCH", f"{path}/{obj['metadata']['name']}/status", status, patch=True)


def install_crds(api: Api) -> None:
    """GKE's snapshot CRDs, once Established; then the gVisor RuntimeClass."""
    definitions = crds()
    for crd in definitions:
        create(api, crd)

    def established() -> bool:
        for crd in definitions:
            got = api.json("GET", f"{collection(crd)}/{crd['metadata']['name']}")
            conditions = (got.get("status") or {}).get("conditions") or []  # null at first
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
        return True

    wait("the CRDs to be Established", established)
    create(api, RUNTIME_CLASS)


def wait_service_accounts(api: Api, namespaces: list[str]) -> None:
    """Until every namespace has its ``default`` ServiceAccount (kube-controller-manager)."""
    for namespace in namespaces:
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/default"
        wait(f"ServiceAccount {namespace}/default", partial(api.exists, path), timeout=90)
