"""What ``make bench-cluster``'s cluster holds: namespaces, the example policy, the pods it creates.

``bench-snap`` holds the example PodSnapshotPolicy (``app=llm``) and its storage config,
``bench-plain`` has no policy, ``snapready`` is the chart's release namespace (its Lease lives
there; both webhooks exclude it). The pods are the captured reviews' pods as a client sends them,
each with a fresh ``generateName``.
"""

from __future__ import annotations

import json

from bench.harness.api import Api, create, install_crds, wait_service_accounts
from bench.harness.identity import RELEASE_NS
from bench.harness.objects import Obj, client_pod, example_policies

POLICY_NS = "bench-snap"
PLAIN_NS = "bench-plain"
KINDS = (
    ("selected", POLICY_NS, "gVisor + 4 x L4 pod (review 03), selected by llm-policy"),
    ("unselected", POLICY_NS, "plain pod (review 01) in the policy namespace, not selected"),
    ("plain", PLAIN_NS, "plain pod (review 01) in a namespace without policies"),
)
REVIEW_OF = {"selected": "03", "unselected": "01", "plain": "01"}


def set_up_cluster(api: Api) -> None:
    """CRDs, the gVisor RuntimeClass, the namespaces, the example policy and storage config."""
    install_crds(api)
    namespaces = [POLICY_NS, PLAIN_NS, RELEASE_NS]
    for namespace in namespaces:
        create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for doc in example_policies():
        if doc["kind"] == "PodSnapshotPolicy":
            doc["metadata"]["namespace"] = POLICY_NS
        create(api, doc)
    wait_service_accounts(api, namespaces)  # the ServiceAccount plugin needs it


def creatable(review_prefix: str, namespace: str) -> Obj:
    """The pod of a captured review as a client would send it, with a fresh ``generateName``."""
    pod = client_pod(review_prefix)
    pod["metadata"] = {
        "generateName": f"{pod['metadata']['name']}-",
        "namespace": namespace,
        "labels": pod["metadata"]["labels"],
    }
    return pod


def pod_bodies() -> dict[str, tuple[str, bytes]]:
    """(namespace, JSON body) of each pod kind."""
    return {
        kind: (namespace, json.dumps(creatable(REVIEW_OF[kind], namespace)).encode())
        for kind, namespace, _ in KINDS
    }
