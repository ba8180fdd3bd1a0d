"""The objects the benchmarks build from captured reviews, and the constant webhook's answers."""

from __future__ import annotations

import orjson

from bench.harness.api import collection
from bench.harness.constant import FIXED_BODY, answer
from bench.harness.objects import API_SERVER_DEFAULTS, client_pod, review


def test_client_pod_has_no_api_server_additions() -> None:
    pod = client_pod("03")
    spec = pod["spec"]
    assert pod["metadata"] == {
        "name": review("03")["request"]["object"]["metadata"]["name"],
        "labels": review("03")["request"]["object"]["metadata"]["labels"],
    }
    assert "serviceAccount" not in spec and "nodeName" not in spec and "status" not in pod
    assert [v["name"] for v in spec["volumes"]] == ["model-cache", "dshm"]
    assert [m["name"] for m in spec["containers"][0]["volumeMounts"]] == ["model-cache", "dshm"]
    assert "tolerations" in spec  # dropped only when asked


def test_client_pod_drops_the_asked_defaults_and_empty_lists() -> None:
    pod = client_pod("01", drop=API_SERVER_DEFAULTS)
    assert not set(API_SERVER_DEFAULTS) & set(pod["spec"])
    assert "volumes" not in pod["spec"]  # only the token volume was there
    assert "volumeMounts" not in pod["spec"]["containers"][0]


def test_collections_of_the_created_kinds() -> None:
    def path(kind: str, namespace: str | None = None) -> str:
        return collection({"kind": kind, "metadata": {"namespace": namespace}})

    assert path("Pod", "ns") == "/api/v1/namespaces/ns/pods"
    assert path("Node") == "/api/v1/nodes"
    assert path("ServiceAccount", "ns") == "/api/v1/namespaces/ns/serviceaccounts"
    assert (
        path("RoleBinding", "ns") == "/apis/rbac.authorization.k8s.io/v1/namespaces/ns/rolebindings"
    )
    assert path("RuntimeClass") == "/apis/node.k8s.io/v1/runtimeclasses"
    assert path("PodSnapshotPolicy", "ns") == (
        "/apis/podsnapshot.gke.io/v1/namespaces/ns/podsnapshotpolicies"
    )
    assert (
        path("PodSnapshotStorageConfig") == "/apis/podsnapshot.gke.io/v1/podsnapshotstorageconfigs"
    )


def test_constant_answers_allow_and_echo_the_uid() -> None:
    body = review("03")
    echoed = orjson.loads(answer(orjson.dumps(body)))
    assert echoed["response"] == {"uid": body["request"]["uid"], "allowed": True}
    assert orjson.loads(FIXED_BODY)["response"]["allowed"] is True
