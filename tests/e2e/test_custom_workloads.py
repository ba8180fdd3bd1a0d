"""Custom resources that embed pod templates reach snapready through the chart's own webhook
configuration on a real kube-apiserver (issue 24): an agent-sandbox SandboxTemplate whose pods a
policy selects is denied before any pod exists, with the path inside the custom resource; one
that no policy selects, or a compliant one, is created. The chart also registers rules for
custom resources whose CRDs are not installed here (Ray, KServe, ...): they are never matched,
and the install works as before.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest

from tests.conftest import DATA
from tests.e2e.conftest import Env, environment, pod_spec
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import install_crds
from tests.support.kube_raw import Obj
from tests.support.webhooks import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def env(
    control_plane: ControlPlane,
    podsnapshot_crds: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Env]:
    """snapready with the chart's default values, one namespace with policy ``app=llm``."""
    api = control_plane.api_client()
    try:
        install_crds(api, DATA / "crds-extra" / "sandboxtemplates.extensions.agents.x-k8s.io.yaml")
    finally:
        api.close()  # type: ignore[no-untyped-call]
    with environment(control_plane, tmp_path_factory.mktemp("e2e-custom"), {"work": {}}) as made:
        yield made


def sandbox_template(name: str, labels: dict[str, str], *, gvisor: bool = True) -> Obj:
    """A SandboxTemplate whose pod template carries ``labels`` (a compliant spec, or one
    without the gVisor runtime class)."""
    spec = copy.deepcopy(pod_spec())
    if not gvisor:
        spec.pop("runtimeClassName", None)
    return {
        "apiVersion": "extensions.agents.x-k8s.io/v1alpha1",
        "kind": "SandboxTemplate",
        "metadata": {"name": name},
        "spec": {"podTemplate": {"metadata": {"labels": labels}, "spec": spec}},
    }


def scope_synced(env: Env) -> bool | None:
    """True once the leader wrote the dynamic scope (``/readyz`` ``webhookScope``)."""
    status: str = env.snapready.process.readyz()[1].get("webhookScope", "")
    return True if status.startswith("synced") else None


def test_a_selected_sandbox_template_without_gvisor_is_denied_at_apply_time(env: Env) -> None:
    namespace = env.namespaces["work"]
    bad = sandbox_template("no-gvisor", {"app": "llm"}, gvisor=False)
    if env.scope_mode == "dynamic":
        # With the leader's matchCondition in place, the denial also proves that the scope
        # sends custom workloads of a namespace with a policy.
        wait_until("the webhook scope", lambda: scope_synced(env), timeout=30)

    def denial() -> str | None:
        reply = env.create(bad, namespace, dry_run=True)
        return reply.message if reply.status == 403 else None

    message = wait_until("the SandboxTemplate denial", denial, timeout=30)
    assert "SandboxTemplate is not snapshot-ready for PodSnapshotPolicy llm-policy" in message
    assert "[gvisor-runtime] spec.podTemplate.spec.runtimeClassName" in message


def test_unselected_and_compliant_sandbox_templates_are_created(env: Env) -> None:
    namespace = env.namespaces["work"]
    other = env.create(sandbox_template("other", {"app": "web"}, gvisor=False), namespace)
    assert other.ok, other.body
    good = env.create(sandbox_template("good", {"app": "llm"}), namespace)
    assert good.ok, good.body
    assert not any("gvisor-runtime" in w for w in good.warnings)
