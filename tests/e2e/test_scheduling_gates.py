"""A gated pod's placement, judged again on a real kube-apiserver with the chart's webhooks.

While a pod has ``spec.schedulingGates`` the API server accepts updates that add nodeSelector
entries, narrow required node affinity and add tolerations (KEP-3838, GA in 1.30; Kueue sets a
ResourceFlavor's node labels so before it ungates). A hostile trial created a pod gated and
unpinned (allowed), then pinned it to ``machine-family: e2``, which rule ``machine-family`` denies
at CREATE: accepted. The chart's ``scheduling.snapready.io`` webhook receives exactly such
UPDATEs (its matchCondition) and denies what the change brings.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.conftest import Env, compliant_pod, environment, must
from tests.envtest.controlplane import ControlPlane

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def env(
    control_plane: ControlPlane,
    podsnapshot_crds: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Env]:
    """snapready from the chart serving one namespace with ``llm-policy`` (``app=llm``)."""
    with environment(control_plane, tmp_path_factory.mktemp("e2e-gates"), {"ns": {}}) as made:
        yield made


def test_a_gated_pod_cannot_take_a_denied_placement_after_admission(env: Env) -> None:
    namespace = env.namespaces["ns"]
    core = client.CoreV1Api(env.api)
    direct = compliant_pod("e2-direct")
    direct["spec"]["nodeSelector"] = {"cloud.google.com/machine-family": "e2"}
    reply = env.create(direct, namespace)
    assert not reply.ok and "machine-family" in str(reply.message), "denied at CREATE"

    gated = compliant_pod("gated")
    del gated["spec"]["nodeSelector"]
    gated["spec"]["schedulingGates"] = [{"name": "example.com/flavor"}]
    must(env.create(gated, namespace))
    e2 = {"spec": {"nodeSelector": {"cloud.google.com/machine-family": "e2"}}}
    with pytest.raises(ApiException) as raised:
        core.patch_namespaced_pod("gated", namespace, e2)
    assert raised.value.status == 403
    assert "machine-family" in str(raised.value.body)
    assert not spec_of(core, "gated", namespace).node_selector, "the denied pin was not stored"

    n2 = {"spec": {"nodeSelector": {"cloud.google.com/machine-family": "n2"}}}
    core.patch_namespaced_pod("gated", namespace, n2)  # a placement the rules accept
    core.patch_namespaced_pod("gated", namespace, {"spec": {"schedulingGates": None}})
    live = spec_of(core, "gated", namespace)
    assert live.node_selector == {"cloud.google.com/machine-family": "n2"}
    assert not live.scheduling_gates


def test_a_gated_pod_no_policy_selects_is_left_alone(env: Env) -> None:
    namespace = env.namespaces["ns"]
    core = client.CoreV1Api(env.api)
    other = compliant_pod("other")
    other["metadata"]["labels"] = {"app": "web"}
    del other["spec"]["nodeSelector"]
    other["spec"]["schedulingGates"] = [{"name": "example.com/flavor"}]
    must(env.create(other, namespace))
    e2 = {"spec": {"nodeSelector": {"cloud.google.com/machine-family": "e2"}}}
    core.patch_namespaced_pod("other", namespace, e2)
    assert spec_of(core, "other", namespace).node_selector == {
        "cloud.google.com/machine-family": "e2"
    }


def spec_of(core: client.CoreV1Api, name: str, namespace: str) -> client.V1PodSpec:
    spec = core.read_namespaced_pod(name, namespace).spec
    assert spec is not None
    return spec
