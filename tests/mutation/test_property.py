"""Property test of the mutation patch over generated pod shapes (hypothesis).

For every pod: ``mutate_pod`` leaves the request object alone; the wire patch applied with the
``jsonpatch`` library to the original equals the mutated working copy; the result passes
``kubernetes-validate --strict`` (Pod schema of Kubernetes 1.33); the stamped fingerprint is the
patched pod's; and the webhook run on its own output yields no patch. Shapes vary: absent, null
and present maps/lists, init containers and native sidecars, user-set ``SNAPREADY_*`` env,
annotation keys with ``/`` and ``~``, stale spec-hash annotations, opt-outs and collisions.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
import kubernetes_validate
from hypothesis import event, given
from hypothesis import strategies as st

from tests.mutation.test_mutation import engine_for
from webhook.admission.context import Engine, pod_context
from webhook.admission.pods import mutate_pod
from webhook.base.types import RawObject
from webhook.kube.responses import Decision, finalize
from webhook.mutation import run_mutators
from webhook.mutation.helpers import injection_wanted
from webhook.pod.distill import fingerprint

KUBERNETES_VERSION = "1.33"
ENGINE = engine_for()
ABSENT = object()
NAMES = ["app", "web", "proxy", "migrate", "cache", "worker"]
ENV_NAMES = ["A", "PATH", "SNAPREADY_HELPERS", "SNAPREADY_CHECKPOINT", "SNAPREADY_SPEC_ENVIRON"]
MOUNT_PATHS = ["/data", "/cache", "/var/run/x", "/snapready", "/snapready/"]
ANNOTATION_KEYS = st.one_of(
    st.sampled_from(["snapready.io/inject", "snapready.io/spec-hash", "snapready.io/policy"]),
    st.text(alphabet="ab~/.-_é", max_size=8),
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Absent (``ABSENT``), ``None`` or a value of ``strategy``."""
    return st.one_of(st.just(ABSENT), st.none(), strategy)


def with_fields(base: RawObject, **optional: Any) -> RawObject:
    """``base`` plus every optional field that is not ``ABSENT``."""
    return {**base, **{key: value for key, value in optional.items() if value is not ABSENT}}


@st.composite
def containers(draw: st.DrawFn, names: list[str], sidecars: bool) -> list[RawObject]:
    """Containers with the given names; init containers may be native sidecars."""
    out = []
    for name in names:
        env = st.lists(
            st.builds(
                lambda n, v: {"name": n, "value": v},
                st.sampled_from(ENV_NAMES),
                st.text(max_size=6),
            ),
            max_size=3,
            unique_by=lambda e: e["name"],
        )
        mounts = st.lists(
            st.builds(
                lambda p: {"name": "data", "mountPath": p, "readOnly": True},
                st.sampled_from(MOUNT_PATHS),
            ),
            max_size=2,
            unique_by=lambda m: m["mountPath"].rstrip("/"),
        )
        resize = st.just([{"resourceName": "cpu", "restartPolicy": "NotRequired"}])
        item = with_fields(
            {"name": name, "image": f"registry.example/{name}@sha256:{'5' * 64}"},
            env=draw(maybe(env)),
            volumeMounts=draw(maybe(mounts)),
            resizePolicy=draw(st.one_of(st.just(ABSENT), resize)),
            restartPolicy="Always" if sidecars and draw(st.booleans()) else ABSENT,
        )
        out.append(item)
    return out


@st.composite
def pods(draw: st.DrawFn) -> RawObject:
    """A Pod of varied shape (valid for the Pod schema, collisions included on purpose)."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    split = draw(st.integers(min_value=1, max_value=len(names)))
    helpers_name = st.sampled_from(["data", "data", "snapready-helpers"])
    volumes = st.lists(
        st.builds(lambda n: {"name": n, "emptyDir": {}}, helpers_name),
        max_size=2,
        unique_by=lambda v: v["name"],
    )
    annotations = st.dictionaries(ANNOTATION_KEYS, st.sampled_from(["false", "true", "", "x"]))
    spec = with_fields(
        {"containers": draw(containers(names[:split], sidecars=False))},
        initContainers=draw(maybe(containers(names[split:], sidecars=True))),
        volumes=draw(maybe(volumes)),
        resources=draw(st.one_of(st.just(ABSENT), st.just({"limits": {"cpu": "2"}}))),
        runtimeClassName=draw(st.one_of(st.just(ABSENT), st.just("gvisor"))),
    )
    metadata = with_fields(
        {"name": "p", "namespace": "snap"},
        annotations=draw(maybe(annotations)),
        labels=draw(maybe(st.just({"app": "llm"}))),
    )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def mutate(pod: RawObject, engine: Engine = ENGINE) -> Decision:
    """``mutate_pod`` as admission calls it for a pod ``llm-policy`` selects."""
    return mutate_pod(pod, context(pod, engine))


def context(pod: RawObject, engine: Engine) -> Any:
    """The PodContext admission builds for ``pod`` (policies: every policy of ``snap``)."""
    state = engine.state()
    return pod_context(
        spec=pod.get("spec"),
        metadata=pod.get("metadata"),
        spec_path="spec",
        metadata_path="metadata",
        namespace="snap",
        kind="Pod",
        policies=state.policies.select("snap", {"app": "llm"}),
        engine=engine,
        state=state,
    )


def wire_ops(decision: Decision) -> list[RawObject]:
    """The operations exactly as serialised in ``response.patch`` ([] when there is none)."""
    response = finalize(decision, uid="u", api_version="admission.k8s.io/v1")["response"]
    ops: list[RawObject] = json.loads(base64.b64decode(response.get("patch", "W10=")))
    return ops


@given(pods())
def test_patch_rebuilds_the_mutated_pod_and_validates(pod: RawObject) -> None:
    original = copy.deepcopy(pod)
    decision = mutate(pod)
    assert pod == original
    event("denied: collision" if not decision.allowed else f"{len(decision.patch)} ops")
    if not decision.allowed:
        assert decision.message is not None
        assert "reserved" in decision.message
        return
    ctx = context(pod, ENGINE)
    draft, _ = run_mutators(pod, ctx, inject=injection_wanted(ctx.metadata, ctx.settings))
    ops = wire_ops(decision)
    patched = jsonpatch.apply_patch(original, ops)
    assert patched == draft.doc
    assert kubernetes_validate.validate(patched, KUBERNETES_VERSION, strict=True)
    assert patched["metadata"]["annotations"]["snapready.io/spec-hash"] == fingerprint(patched)
    assert wire_ops(mutate(patched)) == []
