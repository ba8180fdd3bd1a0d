"""Pod mutation through ``admit(..., "mutate", engine)``: injection, opt-outs, collisions,
reinvocation, operations that are never mutated, and determinism.

Pods are the captured review 03 envelope around hand-made objects (or the captured objects);
expected values are written out here, never taken from the code under test.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import pytest
from pydantic import ValidationError

from tests.conftest import DATA, EXAMPLES, load_review, make_settings
from webhook.admission.engine import Engine, admit
from webhook.base.config import Settings
from webhook.base.types import RawObject
from webhook.kube.responses import Decision, finalize
from webhook.kube.review import parse_review
from webhook.mutation import as_admitted
from webhook.pod.distill import fingerprint
from webhook.server.runner import build_engine

GOLDEN = DATA / "golden"
GOLDEN_POLICIES = GOLDEN / "policies"
"""``llm-policy`` (app=llm) and ``plain-policy`` (run=plain, review 01) in namespace snap."""
IMAGE = "ghcr.io/snapready/helpers:0.1.0@sha256:" + "0" * 64
POLICY_KEY = "snapready.io/policy"
HASH_KEY = "snapready.io/spec-hash"
HELPERS_MOUNT = {"name": "snapready-helpers", "mountPath": "/snapready", "readOnly": True}
INJECTED_ENV = [
    {"name": "SNAPREADY_SPEC_ENVIRON", "value": "/proc/gvisor/spec_environ"},
    {"name": "SNAPREADY_CHECKPOINT", "value": "/proc/gvisor/checkpoint"},
    {"name": "SNAPREADY_HELPERS", "value": "/snapready"},
]
HELPERS_INIT_CONTAINER = {
    "name": "snapready-helpers",
    "image": IMAGE,
    # A native sidecar: it runs for the pod's life, so a GKE Pod snapshot restores it with the
    # pod and the emptyDir it first mounted (tests/gvisor/test_pod_sandbox.py). It copies, then
    # waits; no postStart hook (a restore could not run it).
    "restartPolicy": "Always",
    "command": [
        "/bin/sh",
        "-c",
        "set -e; for f in /opt/snapready/helpers/*; do n=${f##*/}; "
        'cp "$f" "/snapready/.$n.new"; mv -f "/snapready/.$n.new" "/snapready/$n"; done; '
        "set +e; trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done",
    ],
    "resources": {
        "limits": {"cpu": "50m", "memory": "16Mi"},
        "requests": {"cpu": "50m", "memory": "16Mi"},
    },
    "volumeMounts": [{"name": "snapready-helpers", "mountPath": "/snapready"}],
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "imagePullPolicy": "IfNotPresent",
    "securityContext": {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsGroup": 65532,
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    },
}


def engine_for(policy_dir: Path = EXAMPLES, **overrides: Any) -> Engine:
    """An engine over ``policy_dir`` with settings ``overrides``."""
    return build_engine(make_settings(source={"policy_dir": policy_dir}, **overrides))


def make_pod(
    spec: RawObject, *, labels: Any = None, annotations: Any = "absent", name: str = "p"
) -> RawObject:
    """A Pod in namespace ``snap`` selected by ``llm-policy`` unless ``labels`` says otherwise."""
    metadata: RawObject = {"name": name, "namespace": "snap", "labels": labels or {"app": "llm"}}
    if annotations != "absent":
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def make_review(obj: Any, *, base: str = "03", **request: Any) -> RawObject:
    """Captured review ``base`` with its object replaced by ``obj`` and request fields set."""
    review = load_review(base)
    review["request"]["object"] = copy.deepcopy(obj)
    review["request"].update(request)
    return review


def run(review: RawObject, engine: Engine, endpoint: str = "mutate") -> Decision:
    """``admit`` one review as the HTTP app does (bytes -> envelope -> decision)."""
    request = parse_review(orjson.dumps(review)).request
    return admit(request, "mutate" if endpoint == "mutate" else "validate", engine)


def wire_patch(review: RawObject, decision: Decision) -> list[RawObject] | None:
    """The patch as the API server receives it (base64 JSON in ``response.patch``), or None."""
    response = finalize(decision, uid=review["request"]["uid"], api_version=review["apiVersion"])
    encoded = response["response"].get("patch")
    if encoded is None:
        assert "patchType" not in response["response"]
        return None
    ops: list[RawObject] = json.loads(base64.b64decode(encoded))
    return ops


def apply(obj: RawObject, decision: Decision) -> RawObject:
    """``obj`` after the decision's patch (``jsonpatch``, as the API server would)."""
    result: RawObject = jsonpatch.apply_patch(obj, list(decision.patch))
    return result


@pytest.fixture(scope="module")
def examples() -> Engine:
    """Engine over the example policies (``llm-policy`` selects app=llm in snap)."""
    return engine_for()


def test_review_03_gets_helpers_env_and_annotations(examples: Engine) -> None:
    review = load_review("03")
    original = review["request"]["object"]
    decision = run(review, examples)
    assert decision.allowed
    pod = apply(original, decision)
    spec, app = pod["spec"], pod["spec"]["containers"][0]
    # The ServiceAccount plugin's token mount comes with it (no reinvocation round for it).
    token = next(v["name"] for v in original["spec"]["volumes"] if v["name"].startswith("kube-"))
    token_mount = {
        "name": token,
        "readOnly": True,
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
    }
    expected_init = {
        **HELPERS_INIT_CONTAINER,
        "volumeMounts": [*HELPERS_INIT_CONTAINER["volumeMounts"], token_mount],
    }
    assert spec["initContainers"] == [expected_init]
    assert spec["volumes"][-1] == {"name": "snapready-helpers", "emptyDir": {}}
    assert spec["volumes"][:-1] == original["spec"]["volumes"]
    assert app["volumeMounts"] == [
        *original["spec"]["containers"][0]["volumeMounts"],
        HELPERS_MOUNT,
    ]
    assert app["env"] == [*original["spec"]["containers"][0]["env"], *INJECTED_ENV]
    annotations = pod["metadata"]["annotations"]
    assert annotations[POLICY_KEY] == "llm-policy"
    assert annotations[HASH_KEY] == fingerprint(pod)
    assert annotations[HASH_KEY].startswith("v1:sha256:")
    assert len(annotations) == 3  # last-applied-configuration is kept


@dataclass(frozen=True)
class Shape:
    """A pod shape and what must hold on the patched pod (``check(original, patched)``)."""

    spec: RawObject
    check: Callable[[RawObject, RawObject], object]
    annotations: Any = "absent"
    labels: dict[str, str] = field(default_factory=lambda: {"app": "llm"})


def container(name: str = "app", **fields: Any) -> RawObject:
    """A container named ``name`` with an image and any other ``fields``."""
    return {"name": name, "image": f"registry.example/{name}@sha256:{'1' * 64}", **fields}


def _names(items: list[RawObject]) -> list[str]:
    return [item["name"] for item in items]


SHAPES = [
    pytest.param(
        Shape(
            {"containers": [container()]},
            lambda o, p: p["metadata"]["annotations"].keys() == {POLICY_KEY, HASH_KEY},
        ),
        id="creates-the-annotations-map-when-absent",
    ),
    pytest.param(
        Shape(
            {"containers": [container()]},
            lambda o, p: p["metadata"]["annotations"].keys() == {POLICY_KEY, HASH_KEY},
            annotations=None,
        ),
        id="creates-the-annotations-map-when-null",
    ),
    pytest.param(
        Shape(
            {"containers": [container()]},
            lambda o, p: (
                p["metadata"]["annotations"]
                == {
                    "a/b~c": "1",
                    "~": "2",
                    "x/": "",
                    POLICY_KEY: "llm-policy",
                    HASH_KEY: fingerprint(p),
                }
            ),
            annotations={"a/b~c": "1", "~": "2", "x/": ""},
        ),
        id="keeps-annotation-keys-with-slash-and-tilde",
    ),
    pytest.param(
        Shape(
            {"containers": [container()], "initContainers": [container("a"), container("b")]},
            lambda o, p: _names(p["spec"]["initContainers"]) == ["snapready-helpers", "a", "b"],
        ),
        id="helpers-go-first-and-existing-init-containers-keep-their-order",
    ),
    pytest.param(
        Shape(
            {
                "containers": [container()],
                "initContainers": [
                    container("migrate"),
                    container("proxy", restartPolicy="Always"),
                ],
            },
            lambda o, p: (
                "volumeMounts" not in p["spec"]["initContainers"][1]
                and p["spec"]["initContainers"][2]["volumeMounts"] == [HELPERS_MOUNT]
                and p["spec"]["initContainers"][2]["restartPolicy"] == "Always"
                and p["spec"]["initContainers"][1]["env"] == INJECTED_ENV
                and p["spec"]["initContainers"][2]["env"] == INJECTED_ENV
            ),
        ),
        id="native-sidecar-gets-mount-and-env-plain-init-container-env-only",
    ),
    pytest.param(
        Shape(
            {
                "containers": [
                    container(
                        env=[
                            {"name": "SNAPREADY_HELPERS", "value": "/opt/mine"},
                            {
                                "name": "SNAPREADY_CHECKPOINT",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                            },
                        ]
                    )
                ]
            },
            lambda o, p: (
                p["spec"]["containers"][0]["env"]
                == [*o["spec"]["containers"][0]["env"], INJECTED_ENV[0]]
            ),
        ),
        id="env-the-user-set-wins-and-is-left-alone",
    ),
    pytest.param(
        Shape(
            {"containers": [container(env=None, volumeMounts=None)], "volumes": None},
            lambda o, p: (
                p["spec"]["containers"][0]["env"] == INJECTED_ENV
                and p["spec"]["containers"][0]["volumeMounts"] == [HELPERS_MOUNT]
                and p["spec"]["volumes"] == [{"name": "snapready-helpers", "emptyDir": {}}]
            ),
        ),
        id="null-env-mounts-and-volumes-are-created",
    ),
    pytest.param(
        Shape(
            {
                "containers": [
                    container(
                        resizePolicy=[{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
                        futureContainerField={"x": [1, None]},
                    )
                ],
                "resources": {"limits": {"cpu": "2"}},
                "futurePodField": None,
            },
            lambda o, p: (
                p["spec"]["resources"] == {"limits": {"cpu": "2"}}
                and "futurePodField" in p["spec"]
                and p["spec"]["futurePodField"] is None
                and p["spec"]["containers"][0]["futureContainerField"] == {"x": [1, None]}
                and p["spec"]["containers"][0]["resizePolicy"]
                == o["spec"]["containers"][0]["resizePolicy"]
            ),
        ),
        id="unknown-and-new-fields-pass-through-untouched",
    ),
    pytest.param(
        Shape(
            {"containers": [container()]},
            lambda o, p: p["metadata"]["annotations"][POLICY_KEY] == "llm-policy,plain-policy",
            labels={"app": "llm", "run": "plain"},
        ),
        id="policy-annotation-names-every-selecting-policy",
    ),
]


@pytest.mark.parametrize("shape", SHAPES)
def test_pod_shapes(shape: Shape) -> None:
    engine = engine_for(GOLDEN_POLICIES)
    pod = make_pod(shape.spec, labels=shape.labels, annotations=shape.annotations)
    original = copy.deepcopy(pod)
    review = make_review(pod)
    decision = run(review, engine)
    assert decision.allowed
    assert review["request"]["object"] == original
    patched = apply(original, decision)
    assert shape.check(original, patched)
    assert patched["metadata"]["annotations"][HASH_KEY] == fingerprint(patched)


def test_custom_prefix_is_escaped_in_pointers() -> None:
    engine = engine_for(prefix="snap~ready.io/")
    decision = run(make_review(make_pod({"containers": [container()]}, annotations={})), engine)
    assert decision.patch[-3:] == (
        {
            "op": "add",
            "path": "/metadata/annotations/snap~0ready.io~1policy",
            "value": "llm-policy",
        },
        {"op": "add", "path": "/metadata/labels/snap~0ready.io~1selected", "value": "true"},
        {
            "op": "add",
            "path": "/metadata/annotations/snap~0ready.io~1spec-hash",
            "value": decision.patch[-1]["value"],
        },
    )


def test_annotations_created_by_the_patch_are_one_operation() -> None:
    """A pod without annotations gets them in the ``add`` that creates the map (issue 16: the
    API server applies fewer operations); keys inside a value are plain, not escaped."""
    engine = engine_for(prefix="snap~ready.io/")
    decision = run(make_review(make_pod({"containers": [container()]})), engine)
    annotations = [op for op in decision.patch if op["path"].startswith("/metadata/annotations")]
    assert annotations == [
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {
                "snap~ready.io/policy": "llm-policy",
                "snap~ready.io/spec-hash": annotations[0]["value"]["snap~ready.io/spec-hash"],
            },
        }
    ]
    assert annotations[0]["value"]["snap~ready.io/spec-hash"].startswith("v1:sha256:")


@dataclass(frozen=True)
class Collision:
    """A pod colliding with the injection and the field paths the denial must name."""

    spec: RawObject
    paths: tuple[str, ...]


COLLISIONS = [
    pytest.param(
        Collision(
            {
                "containers": [container()],
                "volumes": [
                    {"name": "data", "emptyDir": {}},
                    {"name": "snapready-helpers", "hostPath": {"path": "/x"}},
                ],
            },
            ("spec.volumes[1]",),
        ),
        id="denies-a-user-volume-named-snapready-helpers",
    ),
    pytest.param(
        Collision({"containers": [container("snapready-helpers")]}, ("spec.containers[0]",)),
        id="denies-an-app-container-named-snapready-helpers",
    ),
    pytest.param(
        Collision(
            {
                "containers": [container()],
                "initContainers": [
                    {
                        "name": "snapready-helpers",
                        "image": "busybox@sha256:" + "2" * 64,
                        "command": ["sh", "-c", "prepare-my-app"],
                    }
                ],
            },
            ("spec.initContainers[0]",),
        ),
        id="denies-an-init-container-named-snapready-helpers-that-is-not-ours",
    ),
    pytest.param(
        Collision(
            {
                "containers": [
                    container(),
                    container("b", volumeMounts=[{"name": "data", "mountPath": "/snapready/"}]),
                ],
                "volumes": [{"name": "data", "emptyDir": {}}],
            },
            ("spec.containers[1].volumeMounts[0]",),
        ),
        id="denies-a-user-mount-at-snapready-with-trailing-slash",
    ),
    pytest.param(
        Collision(
            {
                "containers": [
                    container(
                        "snapready-helpers", volumeMounts=[{"name": "d", "mountPath": "/snapready"}]
                    )
                ],
                "volumes": [{"name": "snapready-helpers", "emptyDir": {"medium": "Memory"}}],
            },
            ("spec.volumes[0]", "spec.containers[0]", "spec.containers[0].volumeMounts[0]"),
        ),
        id="denies-listing-every-collision-at-once",
    ),
]


@pytest.mark.parametrize("collision", COLLISIONS)
def test_collisions_are_denied_with_every_path(collision: Collision) -> None:
    decision = run(make_review(make_pod(collision.spec)), engine_for())
    assert not decision.allowed
    assert decision.code == 403
    assert decision.message is not None
    assert "reserved" in decision.message
    assert 'snapready.io/inject: "false"' in decision.message
    for path in collision.paths:
        assert f"{path}:" in decision.message
    assert not decision.patch


COLLIDING_POD = make_pod(
    {
        "containers": [container()],
        "volumes": [{"name": "snapready-helpers", "hostPath": {"path": "/x"}}],
    }
)


@pytest.mark.parametrize(
    ("mode", "warned"),
    [
        pytest.param("warn", True, id="warn-mode-skips-injection-with-a-warning"),
        pytest.param("audit", False, id="audit-mode-skips-injection-silently"),
    ],
)
def test_collisions_outside_enforce_mode_only_skip_injection(mode: str, warned: bool) -> None:
    decision = run(make_review(COLLIDING_POD), engine_for(enforcement=mode))
    assert decision.allowed
    assert any("reserved" in w for w in decision.warnings) == warned
    patched = apply(COLLIDING_POD, decision)
    assert patched["spec"] == COLLIDING_POD["spec"]
    assert patched["metadata"]["annotations"].keys() == {POLICY_KEY, HASH_KEY}


@pytest.mark.parametrize(
    ("annotations", "overrides", "injected"),
    [
        pytest.param({"snapready.io/inject": "false"}, {}, False, id="inject-false-skips-helpers"),
        pytest.param({"snapready.io/inject": "False"}, {}, False, id="inject-False-any-case"),
        pytest.param({"snapready.io/inject": "true"}, {}, True, id="inject-true-injects"),
        pytest.param(
            None, {"injection": {"enabled": False}}, False, id="injection-disabled-in-settings"
        ),
    ],
)
def test_opting_out_keeps_the_spec_and_still_stamps(
    annotations: Any, overrides: dict[str, Any], injected: bool
) -> None:
    pod = make_pod(
        {
            "containers": [container()],
            "volumes": [{"name": "snapready-helpers", "emptyDir": {"medium": "Memory"}}],
        }
        if not injected
        else {"containers": [container()]},
        annotations=annotations,
    )
    decision = run(make_review(pod), engine_for(**overrides))
    assert decision.allowed
    patched = apply(pod, decision)
    assert (patched["spec"] != pod["spec"]) == injected
    assert patched["metadata"]["annotations"][HASH_KEY] == fingerprint(patched)


SIDECAR_POD = make_pod(
    {
        "containers": [container(), container("b", env=[{"name": "X", "value": "1"}])],
        "initContainers": [container("migrate"), container("proxy", restartPolicy="Always")],
        "volumes": [{"name": "data", "emptyDir": {}}],
    }
)


@pytest.mark.parametrize(
    "review",
    [
        pytest.param(load_review("03"), id="review-03-gpu-pod"),
        pytest.param(load_review("40"), id="review-40-replicaset-pod"),
        pytest.param(load_review("21"), id="review-21-dry-run"),
        pytest.param(make_review(SIDECAR_POD), id="pod-with-init-containers-and-sidecar"),
        pytest.param(
            make_review(
                make_pod(
                    {"containers": [container()]}, annotations={"snapready.io/inject": "false"}
                )
            ),
            id="opted-out-pod",
        ),
    ],
)
def test_reinvocation_on_our_own_output_yields_no_patch(
    review: RawObject, examples: Engine
) -> None:
    first = run(review, examples)
    assert first.patch
    again = copy.deepcopy(review)
    again["request"]["object"] = apply(review["request"]["object"], first)
    second = run(again, examples)
    assert second.allowed
    assert second.patch == ()
    assert wire_patch(again, second) is None


def test_stale_hash_after_another_webhook_gets_only_the_annotation_replaced(
    examples: Engine,
) -> None:
    review = load_review("03")
    mutated = apply(review["request"]["object"], run(review, examples))
    mutated["spec"]["containers"][0]["image"] = "registry.example/other@sha256:" + "3" * 64
    review["request"]["object"] = mutated
    decision = run(review, examples)
    assert list(decision.patch) == [
        {
            "op": "replace",
            "path": "/metadata/annotations/snapready.io~1spec-hash",
            "value": fingerprint(mutated),
        }
    ]


def service_account_plugin(pod: RawObject) -> None:
    """What the API server's ServiceAccount admission plugin does when it re-runs after a webhook
    mutated the pod (built-in mutating plugins run again before webhooks are reinvoked): mount
    the ``kube-api-access-*`` token volume into every container and init container that has no
    mount at the token path (plugin/pkg/admission/serviceaccount, ``mountServiceAccountToken``)."""
    token_path = "/var/run/secrets/kubernetes.io/serviceaccount"
    volume = next(v["name"] for v in pod["spec"]["volumes"] if v["name"].startswith("kube-api"))
    for key in ("initContainers", "containers"):
        for item in pod["spec"].get(key, []):
            mounts = item.setdefault("volumeMounts", [])
            if not any(m["mountPath"] == token_path for m in mounts):
                mounts.append({"name": volume, "readOnly": True, "mountPath": token_path})


def limit_ranger(pod: RawObject) -> None:
    """A LimitRange default for ephemeral-storage, added to every container lacking it."""
    for key in ("initContainers", "containers"):
        for item in pod["spec"].get(key, []):
            for kind in ("limits", "requests"):
                item.setdefault("resources", {}).setdefault(kind, {})
                item["resources"][kind].setdefault("ephemeral-storage", "1Gi")


def always_pull_images(pod: RawObject) -> None:
    """The AlwaysPullImages admission plugin: ``imagePullPolicy: Always`` on every container."""
    for key in ("initContainers", "containers"):
        for item in pod["spec"].get(key, []):
            item["imagePullPolicy"] = "Always"


def policy_engine(pod: RawObject) -> None:
    """A policy webhook that hardens every container: more dropped capabilities, more CPU."""
    for key in ("initContainers", "containers"):
        for item in pod["spec"].get(key, []):
            item.setdefault("securityContext", {})["capabilities"] = {"drop": ["ALL", "NET_RAW"]}
            item.setdefault("resources", {}).setdefault("requests", {})["cpu"] = "100m"


def registry_mirror(pod: RawObject) -> None:
    """A mutating webhook that rewrites every image to a mirror registry."""
    for key in ("initContainers", "containers"):
        for item in pod["spec"].get(key, []):
            item["image"] = "mirror.example/" + item["image"].split("/", 1)[-1]


@pytest.mark.parametrize("enforcement", ["enforce", "warn"])
@pytest.mark.parametrize(
    "later_plugins",
    [
        pytest.param((service_account_plugin,), id="service-account-token-mount-on-our-init"),
        pytest.param((service_account_plugin, limit_ranger), id="plus-limitrange-defaults"),
        pytest.param((registry_mirror,), id="image-rewritten-by-a-registry-mirror"),
        pytest.param((always_pull_images,), id="always-pull-images-plugin"),
        pytest.param((policy_engine,), id="policy-engine-rewrites-capabilities-and-cpu"),
    ],
)
def test_reinvocation_after_built_in_plugins_changed_our_init_container_is_not_a_collision(
    later_plugins: tuple[Callable[[RawObject], None], ...], enforcement: str
) -> None:
    # Found by a user test: the reinvocation after the ServiceAccount plugin re-ran denied
    # every selected pod with "names are reserved" (its own init container).
    engine = engine_for(enforcement=enforcement)
    review = load_review("03")
    mutated = apply(review["request"]["object"], run(review, engine))
    for plugin in later_plugins:
        plugin(mutated)
    review["request"]["object"] = mutated
    decision = run(review, engine)
    assert decision.allowed, decision.message
    assert not any("reserved" in warning for warning in decision.warnings)
    hash_only = [op["path"] for op in decision.patch]
    assert hash_only in ([], ["/metadata/annotations/snapready.io~1spec-hash"])
    admitted = apply(mutated, decision)
    init = admitted["spec"]["initContainers"]
    assert [c["name"] for c in init].count("snapready-helpers") == 1
    assert admitted["metadata"]["annotations"][HASH_KEY] == fingerprint(admitted)


def test_a_user_init_container_with_the_reserved_name_is_refused_even_with_our_image(
    examples: Engine,
) -> None:
    # Our name and image but another command: not the container we inject.
    own = {**HELPERS_INIT_CONTAINER, "command": ["sh", "-c", "cp -R /data/. /snapready/"]}
    pod = make_pod({"initContainers": [own], "containers": [container()]})
    decision = run(make_review(pod), examples)
    assert not decision.allowed
    assert "spec.initContainers[0]: container name 'snapready-helpers'" in (decision.message or "")


def test_run_to_completion_init_container_may_mount_its_own_volume_at_snapready(
    examples: Engine,
) -> None:
    # We never mount the helpers into a classic init container, so its own /snapready mount
    # does not collide with anything.
    own_mount = {"name": "data", "mountPath": "/snapready"}
    init = {**container("prepare"), "volumeMounts": [own_mount]}
    pod = make_pod(
        {
            "initContainers": [init],
            "containers": [container()],
            "volumes": [{"name": "data", "emptyDir": {}}],
        }
    )
    decision = run(make_review(pod), examples)
    assert decision.allowed, decision.message
    admitted = apply(pod, decision)
    names = [c["name"] for c in admitted["spec"]["initContainers"]]
    assert names == ["snapready-helpers", "prepare"]
    assert admitted["spec"]["initContainers"][1]["volumeMounts"] == [own_mount]
    assert HELPERS_MOUNT in admitted["spec"]["containers"][0]["volumeMounts"]


def test_init_container_added_by_a_later_webhook_gets_env_and_a_fresh_hash(
    examples: Engine,
) -> None:
    review = make_review(SIDECAR_POD)
    mutated = apply(SIDECAR_POD, run(review, examples))
    mutated["spec"]["initContainers"].insert(0, container("istio-init"))
    review["request"]["object"] = mutated
    ops = run(review, examples).patch
    assert [op["path"] for op in ops] == [
        "/spec/initContainers/0/env",
        "/metadata/annotations/snapready.io~1spec-hash",
    ]
    assert ops[0]["value"] == INJECTED_ENV


def test_dry_run_gets_the_same_patch_as_a_real_request(examples: Engine) -> None:
    review = load_review("21")
    assert review["request"]["dryRun"] is True
    real = copy.deepcopy(review)
    real["request"]["dryRun"] = False
    dry = run(review, examples)
    assert dry.patch
    assert dry.patch == run(real, examples).patch


@pytest.mark.parametrize(
    "request_fields",
    [
        pytest.param({"operation": "UPDATE"}, id="update-is-never-mutated"),
        pytest.param({"operation": "DELETE", "object": None}, id="delete-is-never-mutated"),
        pytest.param({"subResource": "status"}, id="status-subresource-is-never-mutated"),
        pytest.param(
            {"subResource": "ephemeralcontainers", "operation": "UPDATE"},
            id="ephemeralcontainers-subresource-is-never-mutated",
        ),
    ],
)
def test_only_pod_create_is_mutated(request_fields: dict[str, Any], examples: Engine) -> None:
    review = load_review("03")
    review["request"]["oldObject"] = copy.deepcopy(review["request"]["object"])
    review["request"].update(request_fields)
    decision = run(review, examples)
    assert decision.allowed
    assert wire_patch(review, decision) is None


def test_unselected_pod_is_not_mutated(examples: Engine) -> None:
    review = load_review("01")
    assert wire_patch(review, run(review, examples)) is None


def test_twin_replicas_get_identical_patches_but_their_own_token_volume(examples: Engine) -> None:
    twin_1, twin_2 = load_review("30"), load_review("31")
    assert twin_1["request"]["object"] != twin_2["request"]["object"]
    patch_1, patch_2 = run(twin_1, examples).patch, run(twin_2, examples).patch
    names = [
        next(
            v["name"]
            for v in r["request"]["object"]["spec"]["volumes"]
            if "api-access" in v["name"]
        )
        for r in (twin_1, twin_2)
    ]
    assert names[0] != names[1]
    normalised = json.dumps(patch_1).replace(names[0], "TOKEN")
    assert normalised == json.dumps(patch_2).replace(names[1], "TOKEN")
    assert patch_1[-1] == patch_2[-1], "one fingerprint for both replicas"


def test_the_helper_image_is_part_of_the_fingerprint() -> None:
    review = load_review("03")
    other = "ghcr.io/snapready/helpers:0.2.0@sha256:" + "4" * 64
    first = run(review, engine_for()).patch[-1]["value"]
    second = run(review, engine_for(injection={"helpers_image": other})).patch[-1]["value"]
    assert first != second


@pytest.mark.parametrize(
    ("injection", "accepted"),
    [
        pytest.param({"helpers_image": "busybox:1.36"}, False, id="refuses-a-tag-only-image"),
        pytest.param({"helpers_image": "busybox"}, False, id="refuses-an-untagged-image"),
        pytest.param(
            {"helpers_image": "busybox:1.36", "allow_tag_only_image": True},
            True,
            id="accepts-a-tag-only-image-when-explicitly-allowed",
        ),
        pytest.param(
            {"helpers_image": "busybox@sha256:" + "a" * 64}, True, id="accepts-a-digest-only-image"
        ),
        pytest.param(
            {"helpers_image": "busybox@sha256:" + "a" * 63}, False, id="refuses-a-short-digest"
        ),
    ],
)
def test_helper_image_must_be_pinned_by_digest(injection: dict[str, Any], accepted: bool) -> None:
    if accepted:
        assert Settings(injection=injection).injection.helpers_image == injection["helpers_image"]
    else:
        with pytest.raises(ValidationError, match="not pinned by digest"):
            Settings(injection=injection)


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(
            make_pod({"containers": [container(env=[{"name": ["odd"]}, "x", None])]}),
            id="env-entries-of-odd-types",
        ),
        pytest.param(
            make_pod({"containers": ["not-a-container", container(volumeMounts={"a": 1})]}),
            id="containers-and-mounts-of-odd-types",
        ),
        pytest.param(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"labels": {"app": "llm"}},
                "spec": None,
            },
            id="null-spec",
        ),
        pytest.param(
            make_pod({"containers": [container()]}, annotations={"snapready.io/inject": ["false"]}),
            id="inject-annotation-that-is-not-a-string",
        ),
    ],
)
def test_odd_shapes_get_a_patch_that_applies_never_a_crash(
    obj: RawObject, examples: Engine
) -> None:
    decision = run(make_review(obj), examples)
    assert decision.allowed
    patched = apply(obj, decision)
    assert patched["metadata"]["annotations"][HASH_KEY] == fingerprint(patched)


@pytest.mark.parametrize(
    ("containers", "mutated"),
    [
        pytest.param(3, True, id="mutates-a-pod-under-the-container-limit"),
        pytest.param(4, False, id="skips-a-pod-over-the-container-limit-with-a-warning"),
    ],
)
def test_container_limit_bounds_mutation(containers: int, mutated: bool) -> None:
    settings = make_settings(injection={"max_containers": 3})
    engine = build_engine(settings)
    review = load_review("03")
    spec = review["request"]["object"]["spec"]
    spec["containers"] = [dict(spec["containers"][0], name=f"c{i}") for i in range(containers)]
    request = parse_review(orjson.dumps(review)).request
    decision = admit(request, "mutate", engine)
    assert decision.allowed is True
    assert bool(decision.patch) is mutated
    assert any("more than 3 containers" in w for w in decision.warnings) is not mutated
    validated = admit(request, "validate", engine)
    # Validation still runs over every container: 4 GPUs each is more than g2-standard-48 has.
    assert validated.allowed is False
    assert "[gpu-" in (validated.message or "")


# ------------------------------------------------------------------ as_admitted (offline shape)


def small_pod(annotations: Any = "absent", **spec: Any) -> RawObject:
    """A two-container pod (app + native sidecar) plus a run-to-completion init container."""
    return make_pod(
        {
            "initContainers": [
                container("setup"),
                container("proxy", restartPolicy="Always"),
            ],
            "containers": [container("app", volumeMounts=[{"name": "d", "mountPath": "/d"}])],
            "volumes": [{"name": "d", "emptyDir": {}}],
            **spec,
        },
        annotations=annotations,
    )


def test_as_admitted_adds_exactly_the_helpers() -> None:
    pod = small_pod()
    before = copy.deepcopy(pod)
    shaped = as_admitted(pod, make_settings())
    assert pod == before  # the input is never modified
    expected = copy.deepcopy(pod)
    spec = expected["spec"]
    spec["volumes"].append({"name": "snapready-helpers", "emptyDir": {}})
    spec["initContainers"].insert(0, HELPERS_INIT_CONTAINER)
    spec["initContainers"][2]["volumeMounts"] = [HELPERS_MOUNT]  # the native sidecar only
    spec["containers"][0]["volumeMounts"].append(HELPERS_MOUNT)
    for item in [spec["initContainers"][1], spec["initContainers"][2], spec["containers"][0]]:
        item["env"] = INJECTED_ENV
    assert shaped == expected


def test_as_admitted_is_the_webhook_patch_minus_annotations_and_label(
    examples: Engine,
) -> None:
    review = load_review("40")
    pod = review["request"]["object"]
    patched = apply(pod, run(review, examples))
    for key in (POLICY_KEY, HASH_KEY):
        del patched["metadata"]["annotations"][key]
    if not patched["metadata"]["annotations"]:
        del patched["metadata"]["annotations"]
    del patched["metadata"]["labels"]["snapready.io/selected"]  # a label: never hashed
    assert as_admitted(pod, make_settings()) == patched


def test_as_admitted_is_idempotent_on_a_live_pod(examples: Engine) -> None:
    review = load_review("03")
    live = apply(review["request"]["object"], run(review, examples))
    assert as_admitted(live, make_settings()) is live


@pytest.mark.parametrize(
    ("pod", "settings"),
    [
        pytest.param(
            small_pod(annotations={"snapready.io/inject": "false"}),
            make_settings(),
            id="pod-opted-out-by-annotation",
        ),
        pytest.param(
            small_pod(annotations={"snapready.io/inject": " FALSE "}),
            make_settings(),
            id="opt-out-value-is-trimmed-and-case-insensitive",
        ),
        pytest.param(
            small_pod(), make_settings(injection={"enabled": False}), id="injection-disabled"
        ),
        pytest.param(
            small_pod(volumes=[{"name": "snapready-helpers", "hostPath": {"path": "/x"}}]),
            make_settings(),
            id="colliding-user-volume",
        ),
        pytest.param(
            small_pod(), make_settings(injection={"max_containers": 2}), id="over-container-limit"
        ),
    ],
)
def test_as_admitted_leaves_pods_the_webhook_would_not_inject(
    pod: RawObject, settings: Settings
) -> None:
    assert as_admitted(pod, settings) is pod


def test_as_admitted_handles_a_pod_template_and_custom_prefix() -> None:
    template = {
        "metadata": {"labels": {"app": "llm"}, "annotations": {"acme.dev/inject": "false"}},
        "spec": {"containers": [container("app")]},
    }
    assert as_admitted(template, make_settings(prefix="acme.dev/")) is template
    shaped = as_admitted(template, make_settings())
    assert shaped["spec"]["initContainers"] == [HELPERS_INIT_CONTAINER]
    assert shaped["spec"]["containers"][0]["volumeMounts"] == [HELPERS_MOUNT]


def test_as_admitted_uses_the_configured_helpers_image() -> None:
    other = "registry.example/helpers@sha256:" + "5" * 64
    shaped = as_admitted(small_pod(), make_settings(injection={"helpers_image": other}))
    assert shaped["spec"]["initContainers"][0]["image"] == other


def test_the_opt_in_readiness_gate_is_added_once_and_leaves_the_fingerprint_alone() -> None:
    """``restore.readiness_gate``: every selected pod gets ``snapready.io/restore-settled`` in
    ``spec.readinessGates`` (not a distilled field), next to the user's own gates."""
    review = load_review("03")
    original = review["request"]["object"]
    original["spec"]["readinessGates"] = [{"conditionType": "example.com/warm"}]
    plain = apply(original, run(review, engine_for()))
    gated_engine = engine_for(restore={"readiness_gate": True})
    gated = apply(original, run(review, gated_engine))
    assert gated["spec"]["readinessGates"] == [
        {"conditionType": "example.com/warm"},
        {"conditionType": "snapready.io/restore-settled"},
    ]
    assert "readinessGates" in plain["spec"] and len(plain["spec"]["readinessGates"]) == 1
    key = "snapready.io/spec-hash"
    assert gated["metadata"]["annotations"][key] == plain["metadata"]["annotations"][key]
    again = copy.deepcopy(review)
    again["request"]["object"] = gated
    assert run(again, gated_engine).patch == (), "idempotent on its own output"


def test_a_restore_outcome_brought_by_a_new_pod_is_removed() -> None:
    """Only the leader writes ``snapready.io/restore-outcome``; a pod created with one (to hide
    a missed restore: the leader skips recorded pods) loses it at admission."""
    review = load_review("03")
    original = review["request"]["object"]
    original["metadata"].setdefault("annotations", {})["snapready.io/restore-outcome"] = "restored"
    decision = run(review, engine_for())
    assert {"op": "remove", "path": "/metadata/annotations/snapready.io~1restore-outcome"} in list(
        decision.patch
    )
    assert (
        "snapready.io/restore-outcome" not in apply(original, decision)["metadata"]["annotations"]
    )
