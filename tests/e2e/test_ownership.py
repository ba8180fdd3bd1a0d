"""Issue 27 deliverable 2 on a real kube-apiserver: snapready's pod metadata is snapready's.

snapready installed from the chart (its ownership webhook: pod UPDATEs, reached only through the
matchCondition comparing snapready's annotations and label in ``object`` and ``oldObject``). The
attacker is a namespace user bound to the built-in ``edit`` ClusterRole: it may patch pods, but
not snapready's annotations or the ``snapready.io/selected`` label; ordinary updates still work
(and never call snapready); snapready's own service account may write them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.conftest import Env, compliant_pod, environment, must
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import service_account_token
from tests.support import kube_raw

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def env(
    control_plane: ControlPlane,
    podsnapshot_crds: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Env]:
    """snapready from the chart serving one namespace with ``llm-policy`` (``app=llm``)."""
    with environment(control_plane, tmp_path_factory.mktemp("e2e-ownership"), {"ns": {}}) as made:
        yield made


def as_account(env: Env, namespace: str, account: str, path: Path) -> client.CoreV1Api:
    """The core API as ServiceAccount ``namespace/account`` (created if missing)."""
    token = service_account_token(env.api, namespace, account)
    kubeconfig = env.plane.token_kubeconfig(path, token, namespace=namespace, user=account)
    return client.CoreV1Api(ControlPlane.client_from_kubeconfig(kubeconfig))


def editor(env: Env, namespace: str, path: Path, name: str = "editor") -> client.CoreV1Api:
    """A namespace user ``name`` bound to the built-in ``edit`` ClusterRole (a RoleBinding)."""
    core = as_account(env, namespace, name, path)
    binding = {
        "metadata": {"name": f"{name}-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    client.RbacAuthorizationV1Api(env.api).create_namespaced_role_binding(
        namespace, client.V1RoleBinding.model_validate(binding)
    )
    return core


def with_role(
    env: Env, namespace: str, account: str, rule: dict[str, Any], path: Path
) -> client.CoreV1Api:
    """The core API as ServiceAccount ``namespace/account``, granted ``rule`` by a Role and a
    RoleBinding named after it (the authorizer may take a moment to see them)."""
    core = as_account(env, namespace, account, path)
    rbac = client.RbacAuthorizationV1Api(env.api)
    role = {"metadata": {"name": account}, "rules": [rule]}
    rbac.create_namespaced_role(namespace, client.V1Role.model_validate(role))
    binding = {
        "metadata": {"name": account},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    rbac.create_namespaced_role_binding(namespace, client.V1RoleBinding.model_validate(binding))
    return core


def refused(call: object) -> ApiException:
    """Run ``call`` (a no-argument callable) and return the ApiException it raised."""
    with pytest.raises(ApiException) as raised:
        call()  # type: ignore[operator]
    return raised.value


def test_an_edit_user_cannot_change_snapreadys_pod_metadata(env: Env, tmp_path: Path) -> None:
    namespace = env.namespaces["ns"]
    must(env.create(compliant_pod("victim"), namespace))
    attacker = editor(env, namespace, tmp_path / "editor.kubeconfig")

    def allowed_to_patch() -> bool:
        try:
            attacker.patch_namespaced_pod("victim", namespace, {"metadata": {"labels": {"a": "1"}}})
        except ApiException as error:
            if error.status == 403 and "cannot patch" in str(error.body):
                return False  # RBAC binding not in the authorizer yet
            raise
        return True

    from tests.support.webhooks import wait_until  # noqa: PLC0415

    wait_until("edit binding", allowed_to_patch, timeout=15)  # an ordinary update passes
    forgeries = {
        "forged policy": {"metadata": {"annotations": {"snapready.io/policy": "llm-forged"}}},
        "forged prediction": {
            "metadata": {"annotations": {"snapready.io/restore-prediction": "miss"}}
        },
        "removed spec-hash": {"metadata": {"annotations": {"snapready.io/spec-hash": None}}},
        "added outcome": {
            "metadata": {"annotations": {"snapready.io/restore-outcome": "restored"}}
        },
        "removed label": {"metadata": {"labels": {"snapready.io/selected": None}}},
    }
    before = env.get(compliant_pod("victim"), namespace)["metadata"]
    for what, patch in forgeries.items():
        error = refused(lambda p=patch: attacker.patch_namespaced_pod("victim", namespace, p))
        assert error.status == 403, what
        assert "may be changed only by snapready" in str(error.body), (what, error.body)
    after = env.get(compliant_pod("victim"), namespace)["metadata"]
    ours = {k: v for k, v in after["annotations"].items() if k.startswith("snapready.io/")}
    assert ours == {k: v for k, v in before["annotations"].items() if k.startswith("snapready.io/")}
    assert after["labels"]["snapready.io/selected"] == "true"

    # A pod the attacker creates with made-up values: the mutating webhook replaces them.
    ghost = compliant_pod("ghost")
    ghost["metadata"]["annotations"] = {"snapready.io/policy": "ghost-policy"}
    reply = kube_raw.create(env.api, ghost, namespace=namespace)
    assert reply.ok and reply.annotations()["snapready.io/policy"] == "llm-policy"


def test_snapreadys_own_service_account_may_write_them(env: Env, tmp_path: Path) -> None:
    namespace = env.namespaces["ns"]
    must(env.create(compliant_pod("own"), namespace))
    release = env.snapready.release
    core = as_account(env, env.snapready.namespace, release, tmp_path / "sa.kubeconfig")
    patch = {"metadata": {"annotations": {"snapready.io/restore-outcome": "missed"}}}
    core.patch_namespaced_pod("own", namespace, patch)
    annotations = env.get(compliant_pod("own"), namespace)["metadata"]["annotations"]
    assert annotations["snapready.io/restore-outcome"] == "missed"


def owned(metadata: dict[str, Any]) -> dict[str, str]:
    """The ``snapready.io/`` labels and annotations of ``metadata``, prefixed by their kind."""
    return {
        f"{part}:{key}": value
        for part in ("labels", "annotations")
        for key, value in (metadata.get(part) or {}).items()
        if key.startswith("snapready.io/")
    }


def test_a_forged_stamp_cannot_wait_on_an_unselected_pod_for_a_relabel(
    env: Env, tmp_path: Path
) -> None:
    """A real-API trial: an ``edit`` user created a pod no policy selects carrying snapready's
    ``selected`` label, a ``v1`` spec-hash, ``restore-prediction: hit`` and ``restore-outcome:
    restored``; no webhook saw it (the scope sends only selected pods), then a relabel into
    ``llm-policy``'s selector changed no snapready key, so the ownership webhook had nothing to
    refuse, and ``snapready status`` counted a restore that never happened. Now the scope sends
    a pod carrying snapready's keys to ``/mutate``, which removes them (the user's ``inject``
    and ``snapshot-source`` stay), and an UPDATE that adds them to an unselected pod is
    refused."""
    namespace = env.namespaces["ns"]
    attacker = editor(env, namespace, tmp_path / "forger.kubeconfig", name="forger")
    forged = compliant_pod("forged", labels={"app": "web", "snapready.io/selected": "true",
                                             "snapready.io/snapshot-source": "true"})  # fmt: skip
    forged["metadata"]["annotations"] = {
        "snapready.io/spec-hash": "v1:sha256:" + "cd" * 32,
        "snapready.io/restore-prediction": "hit",
        "snapready.io/restore-outcome": "restored",
        "snapready.io/inject": "false",
    }
    from tests.support.webhooks import wait_until  # noqa: PLC0415

    def create() -> client.V1Pod | None:
        try:
            return attacker.create_namespaced_pod(namespace, client.V1Pod.model_validate(forged))
        except ApiException as error:
            if error.status == 403 and "cannot create" in str(error.body):
                return None  # RBAC binding not in the authorizer yet
            raise

    wait_until("edit binding", create, timeout=15)
    assert owned(env.get(forged, namespace)["metadata"]) == {
        "labels:snapready.io/snapshot-source": "true",
        "annotations:snapready.io/inject": "false",
    }

    for patch in (
        {"metadata": {"labels": {"snapready.io/selected": "true"}}},
        {"metadata": {"annotations": {"snapready.io/restore-outcome": "restored"}}},
    ):
        error = refused(lambda p=patch: attacker.patch_namespaced_pod("forged", namespace, p))
        assert error.status == 403 and "may be changed only by snapready" in str(error.body)

    attacker.patch_namespaced_pod("forged", namespace, {"metadata": {"labels": {"app": "llm"}}})
    relabelled = env.get(forged, namespace)["metadata"]
    assert relabelled["labels"]["app"] == "llm"
    assert "labels:snapready.io/selected" not in owned(relabelled)
    assert "annotations:snapready.io/restore-outcome" not in owned(relabelled)


def test_a_pods_status_write_cannot_change_snapreadys_metadata(env: Env, tmp_path: Path) -> None:
    """The same trial: an account allowed ``pods/status`` (custom controllers' roles often are)
    changed snapready's annotations and removed its label through the status subresource, which
    stores them; the ownership webhook listened to ``pods`` only."""
    namespace = env.namespaces["ns"]
    must(env.create(compliant_pod("status-victim"), namespace))
    rule = {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get", "patch"]}
    writer = with_role(env, namespace, "statuser", rule, tmp_path / "statuser.kubeconfig")
    before = owned(env.get(compliant_pod("status-victim"), namespace)["metadata"])
    patch = {
        "metadata": {
            "annotations": {"snapready.io/restore-outcome": "restored"},
            "labels": {"snapready.io/selected": None},
        }
    }
    from tests.support.webhooks import wait_until  # noqa: PLC0415

    def answer() -> ApiException | None:
        try:
            writer.patch_namespaced_pod_status("status-victim", namespace, patch)
        except ApiException as error:
            if error.status == 403 and "cannot patch" in str(error.body):
                return None  # RBAC binding not in the authorizer yet
            return error
        raise AssertionError("a pods/status write changed snapready's metadata")

    error = wait_until("status binding", answer, timeout=15)
    assert error.status == 403
    assert "may be changed only by snapready" in str(error.body)
    assert owned(env.get(compliant_pod("status-victim"), namespace)["metadata"]) == before
    # An ordinary status write (no snapready key) never reaches snapready and passes.
    writer.patch_namespaced_pod_status(
        "status-victim", namespace, {"metadata": {"annotations": {"team": "a"}}}
    )


def test_a_view_user_can_run_status_and_explain_in_its_namespace(
    env: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real-API trial: the docs said a tenant can run ``snapready status``/``explain``, but
    both stopped at listing GKE's PodSnapshotPolicies (403, exit 2): the chart aggregated only
    its SnapshotRecords into ``view``. ``tenantSnapshotRead`` (default true) aggregates read of
    GKE's snapshot objects too; the API server's own aggregation controller and authorizer
    decide it here."""
    from webhook.cli import main  # noqa: PLC0415

    namespace = env.namespaces["ns"]
    must(env.create(compliant_pod("seen"), namespace))
    token = service_account_token(env.api, namespace, "viewer")
    kubeconfig = env.plane.token_kubeconfig(
        tmp_path / "viewer.kubeconfig", token, namespace=namespace, user="viewer"
    )
    binding = {
        "metadata": {"name": "viewer-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": namespace}],
    }
    client.RbacAuthorizationV1Api(env.api).create_namespaced_role_binding(
        namespace, client.V1RoleBinding.model_validate(binding)
    )
    from tests.support.webhooks import wait_until  # noqa: PLC0415

    def status() -> tuple[int, str, str] | None:
        code = main(["status", "-n", namespace, "--kubeconfig", str(kubeconfig)])
        out, err = capsys.readouterr()
        return (code, out, err) if code == 0 else None  # the binding takes a moment

    _, out, err = wait_until("view binding", status, timeout=20)
    assert "llm-policy" in out, out
    # cluster-scoped facts (nodes, ComputeClasses) stay the cluster's: noted, left out
    assert "podsnapshot" not in err and "snapshotrecords" not in err, err
    explained = main(["explain", "seen", "-n", namespace, "--kubeconfig", str(kubeconfig)])
    out, err = capsys.readouterr()
    assert explained == 0, err
    assert "seen" in out


@pytest.mark.parametrize("resource", ["pods/binding", "bindings"])
def test_a_binding_cannot_carry_snapreadys_keys_onto_a_pod(
    env: Env, tmp_path: Path, resource: str
) -> None:
    """The review of the trial's fixes: the API server copies a Binding's labels and annotations
    onto the pod it binds, and a Binding CREATE is no pod UPDATE, so an account allowed to bind
    (a custom scheduler's) could write ``restore-outcome`` or the ``selected`` label past the
    ownership webhook. A new-user trial then found the labels unchecked and the older
    ``bindings`` resource never sent (the webhook scope passed only ``pods``). Denied now, by
    either path; a Binding without them (the scheduler's, or one with the user's ``inject``)
    binds as before."""
    namespace = env.namespaces["ns"]
    pod_name = f"to-bind-{resource.replace('/', '-')}"
    must(env.create(compliant_pod(pod_name), namespace))
    account = f"binder-{resource.replace('/', '-')}"
    rule = {"apiGroups": [""], "resources": [resource], "verbs": ["create"]}
    binder = with_role(env, namespace, account, rule, tmp_path / f"{account}.kubeconfig")
    path = (
        f"/api/v1/namespaces/{namespace}/pods/{pod_name}/binding"
        if resource == "pods/binding"
        else f"/api/v1/namespaces/{namespace}/bindings"
    )

    def bind(metadata: dict[str, Any]) -> kube_raw.Reply:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod_name, **metadata},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
        }
        return kube_raw.request(binder.api_client, "POST", path, body)

    from tests.support.webhooks import wait_until  # noqa: PLC0415

    forgeries = [
        {"annotations": {"snapready.io/restore-outcome": "restored", "team": "a"}},
        {"labels": {"snapready.io/selected": "false"}},
    ]

    def first_bind() -> kube_raw.Reply | None:
        reply = bind(forgeries[0])
        if reply.status == 403 and "cannot create" in reply.message:
            return None  # the RBAC binding is not in the authorizer yet
        return reply

    replies = [wait_until("bind binding", first_bind, timeout=15), bind(forgeries[1])]
    for reply in replies:
        assert reply.status == 403, reply.body
        assert "on a Binding may be set only by snapready" in reply.message
    pod = env.get(compliant_pod(pod_name), namespace)
    assert "snapready.io/restore-outcome" not in pod["metadata"]["annotations"]
    assert pod["metadata"]["labels"]["snapready.io/selected"] == "true"
    assert not pod["spec"].get("nodeName")

    reply = bind({"annotations": {"team": "a", "snapready.io/inject": "false"}})
    assert reply.ok, reply.body
    assert env.get(compliant_pod(pod_name), namespace)["spec"]["nodeName"] == "node-a"
