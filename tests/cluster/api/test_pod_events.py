"""A stamped pod's watch events fill the pods cache without publishing a new ``ClusterState``
(``syncing.Resource.in_place``), through the real API server, snapready as its ServiceAccount.

The pods view is the cache's own dict, edited in place: every reader of any state sees the pod
at once, so a state rebuilt per pod event (every created replica) was CPU spent for nothing.
A change of another collection (a PodSnapshotPolicy) still publishes a new state.
"""

from __future__ import annotations

from dataclasses import fields

from kubernetes import client

from tests.cluster.conftest import StartCluster
from tests.envtest.plugin import wait_for
from tests.support.kube_real import create_policy, policy
from webhook.snapshots.state import ClusterState


def test_stamped_pod_events_fill_the_cache_without_a_new_state(
    kube_admin: client.ApiClient,
    podsnapshot_crds: list[str],
    namespace: str,
    start_cluster: StartCluster,
) -> None:
    running = start_cluster()
    before = running.state()
    core = client.CoreV1Api(kube_admin)
    body = {
        "metadata": {"name": "replica-1", "labels": {"snapready.io/selected": "true", "n": "1"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    core.create_namespaced_pod(namespace, client.V1Pod.model_validate(body))
    key = f"{namespace}/replica-1"
    wait_for("the stamped pod in the cache", lambda: key in running.state().pods, timeout=20)
    core.patch_namespaced_pod("replica-1", namespace, {"metadata": {"labels": {"n": "2"}}})
    wait_for(
        "the relabelled pod in the cache",
        lambda: running.state().pods[key].labels.get("n") == "2",
        timeout=20,
    )
    # Two pod events, no new state. The control plane is shared with tests running beside this
    # one (their GKE Events are watched cluster-wide): a state published meanwhile must say
    # what else changed, never only the pods.
    after = running.state()
    changed = [
        f.name
        for f in fields(ClusterState)
        if f.name != "pods" and getattr(after, f.name) != getattr(before, f.name)
    ]
    assert after is before or changed, "a new state for pod events alone"
    assert after.pods is before.pods  # the cache's own dict, edited in place
    create_policy(kube_admin, policy("llm-policy", namespace, {"app": "llm"}))
    wait_for("the policy's new state", lambda: running.state() is not before, timeout=20)
    assert key in running.state().pods
