"""The repository's data files the benchmarks read, and the objects they build from them.

A captured review's pod becomes a pod as a client sends it (:func:`client_pod`); the snapshot
CRDs and the gVisor RuntimeClass are what GKE installs on a cluster with Pod snapshots and GKE
Sandbox.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]

ROOT = Path(__file__).resolve().parents[2]
REVIEWS = ROOT / "tests" / "data" / "reviews"
CRDS = ROOT / "tests" / "data" / "crds" / "podsnapshot.gke.io.yaml"
SNAPREADY_CRDS = ROOT / "chart" / "crds"
EXAMPLES = ROOT / "manifests" / "examples"
EXAMPLE_POLICIES = EXAMPLES / "policies.yaml"

RUNTIME_CLASS: Obj = {
    "apiVersion": "node.k8s.io/v1",
    "kind": "RuntimeClass",
    "metadata": {"name": "gvisor"},
    "handler": "gvisor",
    "scheduling": {  # as GKE Sandbox installs it
        "nodeSelector": {"sandbox.gke.io/runtime": "gvisor"},
        "tolerations": [
            {
                "key": "sandbox.gke.io/runtime",
                "operator": "Equal",
                "value": "gvisor",
                "effect": "NoSchedule",
            }
        ],
    },
}

API_SERVER_DEFAULTS = (
    "tolerations",
    "priority",
    "enableServiceLinks",
    "preemptionPolicy",
    "schedulerName",
)
"""Pod spec fields the API server (its defaults and admission plugins) fills in."""


def review_file(prefix: str) -> Path:
    """The captured review whose file name starts with ``prefix`` (``"03"``)."""
    return next(REVIEWS.glob(f"{prefix}-*.json"))


def review(prefix: str) -> Obj:
    """The decoded captured review ``prefix``."""
    decoded: Obj = json.loads(review_file(prefix).read_text())
    return decoded


def crds() -> list[Obj]:
    """GKE's Pod snapshot CustomResourceDefinitions and snapready's own (``chart/crds/``: the
    SnapshotRecord, as ``helm install`` applies it)."""
    texts = [CRDS.read_text(), *(p.read_text() for p in sorted(SNAPREADY_CRDS.glob("*.yaml")))]
    return [doc for text in texts for doc in yaml.safe_load_all(text) if doc]


def example_policies() -> list[Obj]:
    """The example PodSnapshotPolicy and its storage config (``manifests/examples``)."""
    return [doc for doc in yaml.safe_load_all(EXAMPLE_POLICIES.read_text()) if doc]


def is_token(volume_name: str) -> bool:
    """The projected service-account token volume the API server adds."""
    return volume_name.startswith("kube-api-access-")


def client_pod(prefix: str, drop: tuple[str, ...] = ()) -> Obj:
    """The pod of review ``prefix`` as a client would send it: no API server additions
    (service-account token volume and mounts, ``serviceAccount``, ``nodeName``, status), without
    the spec fields in ``drop`` either; ``metadata`` keeps only the name and the labels."""
    pod: Obj = copy.deepcopy(review(prefix)["request"]["object"])
    metadata = pod["metadata"]
    pod["metadata"] = {"name": metadata["name"], "labels": metadata.get("labels", {})}
    spec = pod["spec"]
    for key in ("serviceAccount", "nodeName", *drop):
        spec.pop(key, None)
    spec["volumes"] = [v for v in spec.get("volumes", []) if not is_token(v["name"])]
    if not spec["volumes"]:
        del spec["volumes"]
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        mounts = [m for m in container.get("volumeMounts", []) if not is_token(m["name"])]
        container["volumeMounts"] = mounts
        if not mounts:
            del container["volumeMounts"]
    pod.pop("status", None)
    return pod
