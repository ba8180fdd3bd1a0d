"""Hypothesis fuzzing of the admission app: generated reviews, pod shapes, mutated real reviews.

Runs in-process through the ASGI app (``create_app`` via ``httpx.ASGITransport``) for speed;
the TLS/HTTP edge itself is covered by ``test_hostile.py``. Every answer must be a well-formed
AdmissionReview echoing the uid (or a 400 JSON error for a broken envelope), any patch must apply
to the submitted object, and no input may reach the internal-error path: an exception in a rule
or mutator is a bug even though the failure policy would hide it from the API server.

Budget: the ``default`` profile (60 examples per test) in ``make test``; ``make fuzz`` runs the
same tests under the ``fuzz`` profile (``HYPOTHESIS_PROFILE=fuzz``).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import load_review, make_settings, review_files
from webhook.base.types import Endpoint
from webhook.kube.responses import Decision
from webhook.kube.review import AdmissionReviewRequest
from webhook.server.app import create_app
from webhook.server.runner import build_engine

pytestmark = pytest.mark.fuzz

API_VERSIONS = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]
OPERATIONS = ["CREATE", "UPDATE", "DELETE", "CONNECT"]
KINDS = [
    ("", "v1", "Pod"),
    ("apps", "v1", "Deployment"),
    ("apps", "v1", "StatefulSet"),
    ("batch", "v1", "Job"),
    ("batch", "v1", "CronJob"),
    ("podsnapshot.gke.io", "v1", "PodSnapshotPolicy"),
    ("podsnapshot.gke.io", "v1", "PodSnapshotStorageConfig"),
    ("", "v1", "ConfigMap"),
]
NODE_LABELS = {
    "cloud.google.com/machine-family": ["e2", "n2", "g2", "a2", "a3", "zz9", ""],
    "node.kubernetes.io/instance-type": ["g2-standard-48", "a2-highgpu-1g", "e2-medium", "x"],
    "cloud.google.com/gke-accelerator": ["nvidia-l4", "nvidia-tesla-a100", "nvidia-tesla-t4"],
    "cloud.google.com/gke-accelerator-count": ["1", "4", "8", "-1", "lots"],
    "cloud.google.com/gke-gpu-partition-size": ["1g.5gb"],
    "cloud.google.com/gke-gpu-sharing-strategy": ["time-sharing", "mps"],
    "cloud.google.com/compute-class": ["gpu-class", ""],
    "cloud.google.com/gke-nodepool": ["pool-a"],
    "kubernetes.io/arch": ["amd64", "arm64"],
}

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def either(plausible: st.SearchStrategy[Any], odds: int = 4) -> st.SearchStrategy[Any]:
    """A plausible value ``odds`` times out of ``odds + 1``, else any JSON value (wrong types)."""
    return st.sampled_from([True] * odds + [False]).flatmap(
        lambda ok: plausible if ok else json_values
    )


def optional_fields(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A dict holding any subset of ``fields``, each value drawn through ``either``."""
    return st.fixed_dictionaries({}, optional={k: either(v) for k, v in fields.items()})


quantities = st.sampled_from(["1", "2", "4", "8", "0", "500m", "1Gi", "-1", "1e3"]) | st.integers(
    -2, 16
)
resources = optional_fields(
    limits=st.dictionaries(
        st.sampled_from(["nvidia.com/gpu", "cpu", "memory", "google.com/tpu"]), quantities
    ),
    requests=st.dictionaries(st.sampled_from(["nvidia.com/gpu", "cpu"]), quantities),
)
env = st.lists(
    optional_fields(
        name=st.text(max_size=8),
        value=st.text(max_size=8),
        valueFrom=st.just({"secretKeyRef": {"name": "s", "key": "k"}}),
    ),
    max_size=3,
)
containers = st.lists(
    optional_fields(
        name=st.sampled_from(["app", "gke-gcsfuse-sidecar", "snapready-helpers", "x"]),
        image=st.sampled_from(["nginx", "nginx@sha256:" + "a" * 64, "", "r/i:1"]),
        resources=resources,
        env=env,
        envFrom=st.just([{"secretRef": {"name": "s"}}]),
        securityContext=optional_fields(privileged=st.booleans()),
        ports=st.lists(
            optional_fields(containerPort=st.integers(0, 70000), hostPort=st.integers(0, 70000))
        ),
        volumeMounts=st.lists(optional_fields(name=st.text(max_size=6), mountPath=st.just("/m"))),
        restartPolicy=st.just("Always"),
    ),
    max_size=3,
)
volumes = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"name": st.text(max_size=6), "csi": st.just({"driver": "gcsfuse.csi.storage.gke.io"})}
        ),
        st.fixed_dictionaries({"name": st.text(max_size=6), "hostPath": st.just({"path": "/"})}),
        st.fixed_dictionaries(
            {"name": st.text(max_size=6), "persistentVolumeClaim": st.just({"claimName": "c"})}
        ),
        st.fixed_dictionaries({"name": st.just("snapready-helpers"), "emptyDir": st.just({})}),
        json_values,
    ),
    max_size=3,
)
node_selector = st.dictionaries(
    st.sampled_from(sorted(NODE_LABELS)),
    st.sampled_from([v for values in NODE_LABELS.values() for v in values]),
)
affinity = st.builds(
    lambda key, values: {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": key, "operator": "In", "values": values}]}
                ]
            }
        }
    },
    st.sampled_from(sorted(NODE_LABELS)),
    either(st.lists(st.text(max_size=8), max_size=3)),
)
pod_specs = st.fixed_dictionaries(
    {"containers": either(containers)},
    optional={
        "runtimeClassName": either(st.sampled_from(["gvisor", "runc", ""])),
        "nodeSelector": either(node_selector),
        "affinity": either(affinity),
        "initContainers": either(containers),
        "ephemeralContainers": either(containers),
        "volumes": either(volumes),
        "hostNetwork": either(st.booleans()),
        "hostPID": either(st.booleans()),
        "tolerations": either(st.lists(json_values, max_size=2)),
    },
)
selected_labels = st.sampled_from([{"app": "llm"}, {"app": "llm", "model": "m"}])
pod_annotations = st.dictionaries(
    st.sampled_from(
        ["gke-gcsfuse/volumes", "snapready.io/spec-hash", "snapready.io/inject", "dev.gvisor.x"]
    ),
    st.sampled_from(["true", "false", "v1:sha256:" + "0" * 64, ""]),
)
metadata = st.fixed_dictionaries(
    {"labels": either(selected_labels)},
    optional={
        "name": either(st.text(max_size=12)),
        "generateName": either(st.text(max_size=12)),
        "namespace": either(st.sampled_from(["snap", "default"])),
        "annotations": either(pod_annotations),
    },
)
pods = st.fixed_dictionaries(
    {"metadata": either(metadata), "spec": either(pod_specs)},
    optional={"apiVersion": st.just("v1"), "kind": st.just("Pod")},
)


def wrap_template(pod: Any, kind: str) -> dict[str, Any]:
    """A pod-controller object whose template is ``pod`` (CronJob one level deeper)."""
    template = pod if isinstance(pod, dict) else {"spec": pod}
    if kind == "CronJob":
        return {
            "metadata": {"name": "cj"},
            "spec": {"jobTemplate": {"spec": {"template": template}}},
        }
    return {"metadata": {"name": "w"}, "spec": {"template": template}}


@st.composite
def reviews(draw: st.DrawFn) -> dict[str, Any]:
    """An AdmissionReview with a generated pod (or pod template) and mostly valid envelope."""
    group, version, kind = draw(st.sampled_from([KINDS[0]] * 4 + KINDS))
    pod = draw(pods)
    obj: Any = pod if kind in ("Pod", "ConfigMap") else wrap_template(pod, kind)
    request = draw(
        st.fixed_dictionaries(
            {
                "kind": st.just({"group": group, "version": version, "kind": kind}),
                "operation": st.sampled_from(["CREATE"] * 6 + OPERATIONS),
                "namespace": st.sampled_from(["snap"] * 6 + ["default", ""]),
                "uid": st.uuids().map(str),
                "object": either(st.just(obj), odds=8),
            },
            optional={
                "dryRun": st.booleans(),
                "oldObject": st.just(obj),
            },
        )
    )
    # Rare (None is drawn most): a subresource skips most of the work.
    sub = draw(st.sampled_from([None] * 6 + ["status", "ephemeralcontainers", "binding"]))
    if sub is not None:
        request["subResource"] = sub
    return {
        "apiVersion": draw(st.sampled_from(API_VERSIONS)),
        "kind": "AdmissionReview",
        "request": request,
    }


@st.composite
def mutated_captures(draw: st.DrawFn) -> dict[str, Any]:
    """A captured real review with up to three values replaced, deleted or re-typed."""
    review = load_review(draw(st.sampled_from([p.name for p in review_files()])))
    for _ in range(draw(st.integers(1, 3))):
        parent: Any = review["request"]
        key: Any = draw(st.sampled_from(sorted(parent)))
        while isinstance(parent[key], dict | list) and parent[key] and draw(st.booleans()):
            parent = parent[key]
            key = draw(
                st.sampled_from(sorted(parent) if isinstance(parent, dict) else range(len(parent)))
            )
        action = draw(st.sampled_from(["replace", "delete", "listify", "nullify"]))
        if action == "delete" and isinstance(parent, dict) and key != "uid":
            del parent[key]
        elif action == "listify":
            parent[key] = [parent[key]]
        elif action == "nullify" and key != "uid":
            parent[key] = None
        elif key != "uid":
            parent[key] = draw(json_values)
    return review


class Recorder:
    """Observer keeping each decision, plus a handler keeping internal-error tracebacks."""

    def __init__(self) -> None:
        self.decisions: list[Decision] = []
        self.errors: list[str] = []

    def __call__(
        self, endpoint: Endpoint, review: AdmissionReviewRequest, decision: Decision, seconds: float
    ) -> None:
        self.decisions.append(decision)


class _ErrorHandler(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.ERROR)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(logging.Formatter().format(record))


class Client:
    """A synchronous face over ``httpx.AsyncClient`` + ``ASGITransport`` on one private loop."""

    def __init__(self, app: Any) -> None:
        self.loop = asyncio.new_event_loop()
        transport = httpx.ASGITransport(app=app)
        self.client = httpx.AsyncClient(transport=transport, base_url="https://fuzz")

    def post(self, path: str, body: bytes) -> httpx.Response:
        """POST ``body`` as JSON to ``path``."""
        request = self.client.post(path, content=body, headers={"Content-Type": "application/json"})
        return self.loop.run_until_complete(request)

    def close(self) -> None:
        """Close the client and its loop."""
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()


@pytest.fixture(scope="module")
def fuzz_client() -> Iterator[tuple[Client, Recorder]]:
    """An in-process client over the app with the example policies and a recording observer."""
    recorder = Recorder()
    handler = _ErrorHandler(recorder.errors)
    logger = logging.getLogger("snapready.admission")
    logger.addHandler(handler)
    client = Client(create_app(build_engine(make_settings()), observer=recorder))
    yield client, recorder
    client.close()
    logger.removeHandler(handler)


def check_answer(fuzz_client: tuple[Client, Recorder], review: Any, endpoint: str) -> None:
    """Post ``review``; assert the answer contract and that no internal error happened."""
    client, recorder = fuzz_client
    recorder.decisions.clear()
    recorder.errors.clear()
    answer = client.post(endpoint, json.dumps(review).encode())
    assert answer.status_code in (200, 400), answer.text[:300]
    payload = answer.json()
    if answer.status_code == 400:
        assert payload["code"] == 400 and payload["error"]
        return
    response = payload["response"]
    assert payload["kind"] == "AdmissionReview"
    assert response["uid"] == review["request"]["uid"]
    if review.get("apiVersion") in API_VERSIONS:
        assert payload["apiVersion"] == review["apiVersion"]
    if "patch" in response:
        assert endpoint == "/mutate" and response["patchType"] == "JSONPatch"
        ops = json.loads(base64.b64decode(response["patch"]))
        jsonpatch.apply_patch(copy.deepcopy(review["request"]["object"]), ops)  # must apply
    errors = [d.audit["internal_error"] for d in recorder.decisions if "internal_error" in d.audit]
    assert not errors, "internal error in admission:\n" + "\n".join(recorder.errors)


@pytest.mark.parametrize("endpoint", ["/mutate", "/validate"])
@given(review=reviews())
def test_generated_reviews_get_well_formed_answers(
    fuzz_client: tuple[Client, Recorder], endpoint: str, review: dict[str, Any]
) -> None:
    check_answer(fuzz_client, review, endpoint)


@pytest.mark.parametrize("endpoint", ["/mutate", "/validate"])
@given(review=mutated_captures())
def test_mutated_captured_reviews_get_well_formed_answers(
    fuzz_client: tuple[Client, Recorder], endpoint: str, review: dict[str, Any]
) -> None:
    check_answer(fuzz_client, review, endpoint)


@given(document=json_values)
def test_arbitrary_json_bodies_are_400_or_a_review(
    fuzz_client: tuple[Client, Recorder], document: Any
) -> None:
    client, _ = fuzz_client
    answer = client.post("/validate", json.dumps(document).encode())
    assert answer.status_code == 400
    assert answer.json()["code"] == 400


@given(body=st.binary(max_size=256))
def test_arbitrary_bytes_never_crash_the_app(
    fuzz_client: tuple[Client, Recorder], body: bytes
) -> None:
    client, _ = fuzz_client
    answer = client.post("/mutate", body)
    assert answer.status_code in (200, 400)
    assert answer.headers["content-type"] == "application/json"
