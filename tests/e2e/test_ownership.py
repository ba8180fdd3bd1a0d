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


def editor(env: Env, namespace: str, path: Path) -> client.CoreV1Api:
    """A namespace user bound to the built-in ``edit`` ClusterRole (a RoleBinding)."""
    core = as_account(env, namespace, "editor", path)
    binding = {
        "metadata": {"name": "editor-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "editor", "namespace": namespace}],
    }
    client.RbacAuthorizationV1Api(env.api).create_namespaced_role_binding(
        namespace, client.V1RoleBinding.model_validate(binding)
    )
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
