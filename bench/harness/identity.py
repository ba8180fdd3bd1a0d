"""snapready's ServiceAccount with the chart's RBAC, for every benchmark that runs snapready.

The chart is rendered with the real Helm engine as release ``snapready`` in namespace
``snapready``; its ServiceAccount and RBAC objects are created and a kubeconfig with a
TokenRequest token of that account is written, so snapready runs with exactly the permissions an
install gives it, never as admin (its Lease in the release namespace, as the chart runs it).
"""

from __future__ import annotations

from pathlib import Path

from bench.harness.api import Api, create
from bench.harness.objects import Obj
from bench.harness.plane import BenchError
from tests.envtest.controlplane import ControlPlane
from tests.support.webhooks import render_chart

RELEASE = RELEASE_NS = "snapready"
"""The chart's release name and namespace (its Lease lives there; both webhooks exclude it)."""
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
INJECT_DIGEST = "sha256:" + "5e" * 32


def chart_objects(inject: bool) -> list[Obj]:
    """The chart rendered with its defaults (``inject``: ``injectHelpers=true`` too)."""
    values: Obj = {}
    if inject:
        values = {"injectHelpers": True, "helpersImage": {"digest": INJECT_DIGEST}}
    return render_chart(values, release=RELEASE, namespace=RELEASE_NS)


def install_identity(api: Api, plane: ControlPlane, objs: list[Obj], tmp: Path) -> Path:
    """The chart's ServiceAccount and RBAC objects (of ``objs``, a rendered chart); a
    kubeconfig in ``tmp`` with a token of that account. The release namespace must exist."""
    account = next(obj for obj in objs if obj["kind"] == "ServiceAccount")
    for obj in objs:
        if obj["kind"] in {"ServiceAccount", *RBAC_KINDS}:
            create(api, obj)
    name = account["metadata"]["name"]
    path = f"/api/v1/namespaces/{RELEASE_NS}/serviceaccounts/{name}/token"
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": 6 * 3600}}  # fmt: skip
    try:
        token: str = api.json("POST", path, request)["status"]["token"]
    except BenchError as error:
        raise BenchError(f"TokenRequest for {RELEASE_NS}/{name}: {error}") from None
    return plane.token_kubeconfig(tmp / "snapready.kubeconfig", token, namespace=RELEASE_NS)
