"""The replica memo (``webhook.admission.replicas``): the next replica of a template gets the
decision the first one got, and never a decision the current inputs would not give.

The premise is checked on the captured reviews (every Pod CREATE, made selected): a copy with
other identity fields (name, generateName, uid, creationTimestamp, managedFields) gets, from an
engine that remembers nothing, the decision the original got, on ``/mutate`` and ``/validate``,
with no Ready snapshot, with a restore hit and with a miss naming fields; the ``ClusterState``
fields the memo ignores raise on any use while every review is admitted. Then the memo itself:
a later replica is a hit equal to a fresh decision; a change of any other state part, of the
settings, the rule table, the namespace, a label or the spec is a miss recomputed on the new
inputs; a change of only the stamped pods is a hit; the memo is bounded.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import grimp
import jsonpatch
import orjson
import pytest

from bench.admit import with_snapshots
from tests.conftest import ROOT, load_review, make_settings, review_files
from webhook.admission.engine import Engine, admit
from webhook.admission.replicas import IDENTITY_FIELDS, NOT_READ, ReplicaMemo, token_volume
from webhook.base.types import Endpoint, RawObject
from webhook.kube.responses import denied
from webhook.kube.review import AdmissionRequest, parse_review
from webhook.pod import memo as fingerprints
from webhook.server.runner import build_engine
from webhook.snapshots.state import ClusterState

POD_CREATES = [
    p.name
    for p in review_files()
    if (r := orjson.loads(p.read_bytes())["request"])["kind"]["kind"] == "Pod"
    and r["operation"] == "CREATE"
    and not r.get("subResource")
]


def cluster_engine() -> Engine:
    """The example policies, PodSnapshots listed (the prediction runs), nothing remembered."""
    engine = build_engine(make_settings())
    assert engine.replicas is not None  # the server's engine remembers replicas
    state = dataclasses.replace(engine.state(), snapshots_known=True)
    engine.state = lambda: state
    return engine


def memo(engine: Engine) -> ReplicaMemo:
    assert engine.replicas is not None
    return engine.replicas


def selected(name: str) -> dict[str, Any]:
    """Review ``name`` as a pod ``llm-policy`` selects (namespace ``snap``, label ``app=llm``)."""
    review = load_review(name)
    request = review["request"]
    request["namespace"] = "snap"
    metadata = request["object"].setdefault("metadata", {})
    metadata["namespace"] = "snap"
    metadata.setdefault("labels", {})["app"] = "llm"
    return review


def renamed(review: dict[str, Any], number: int) -> dict[str, Any]:
    """Another replica: every identity field of the pod changed, the request's uid and name too."""
    other = copy.deepcopy(review)
    request = other["request"]
    metadata = request["object"]["metadata"]
    metadata["name"] = f"replica-{number}"
    metadata["generateName"] = f"other-{number}-"
    metadata["uid"] = f"00000000-0000-0000-0000-{number:012d}"
    metadata["creationTimestamp"] = f"2026-12-06T10:{number % 60:02d}:00Z"
    metadata["resourceVersion"] = str(number)
    metadata["managedFields"] = [{"manager": f"m{number}", "time": metadata["creationTimestamp"]}]
    request["uid"] = metadata["uid"]
    request["name"] = metadata["name"]
    token = f"kube-api-access-{number:05d}"
    spec = request["object"]["spec"]
    for volume in spec.get("volumes", []):
        if volume["name"].startswith("kube-api-access-"):
            volume["name"] = token
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        for mount in container.get("volumeMounts", []):
            if mount["name"].startswith("kube-api-access-"):
                mount["name"] = token
    return other


def request_of(review: dict[str, Any]) -> AdmissionRequest:
    return parse_review(orjson.dumps(review)).request


def validating(review: dict[str, Any], engine: Engine) -> dict[str, Any]:
    """The ``/validate`` review of the pod as snapready's ``/mutate`` patch left it."""
    decision = admit(request_of(review), "mutate", engine)
    out = copy.deepcopy(review)
    out["request"]["object"] = jsonpatch.apply_patch(out["request"]["object"], list(decision.patch))
    return out


def fresh(review: dict[str, Any], endpoint: Endpoint, engine: Engine) -> Any:
    """``review``'s decision from ``engine`` with every memo emptied first."""
    memo(engine).clear()
    fingerprints._memo.clear()
    fingerprints._digests.clear()
    return admit(request_of(review), endpoint, engine)


def states() -> Iterator[tuple[str, Engine]]:
    body = orjson.dumps(load_review("03"))
    base = cluster_engine()
    yield "no Ready snapshot", base
    yield "restore hit", with_snapshots(base, body, match=True)
    yield "restore miss", with_snapshots(base, body, match=False)


@pytest.mark.parametrize("name", POD_CREATES)
def test_identity_fields_change_no_decision(name: str) -> None:
    """The premise: a replica with other identity fields gets the same decision, fresh."""
    for label, engine in states():
        review = selected(name)
        pairs: list[tuple[Endpoint, dict[str, Any]]] = [
            ("mutate", review), ("validate", validating(review, engine))
        ]  # fmt: skip
        for endpoint, original in pairs:
            expected = fresh(original, endpoint, engine)
            for number in (1, 2):
                replica = renamed(original, number)
                got = fresh(replica, endpoint, engine)
                token = token_volume(replica["request"]["object"])
                assert token is None or token_volume(original["request"]["object"]) is not None
                assert untokened(got, token) == untokened(expected, token_of(original)), (
                    label, endpoint, number,
                )  # fmt: skip


def token_of(review: dict[str, Any]) -> bytes | None:
    return token_volume(review["request"]["object"])


def untokened(decision: Any, token: bytes | None) -> bytes:
    """``decision`` as JSON, the pod's token volume name (if any) made ``TOKEN``."""
    written = orjson.dumps(decision, default=str)
    return written if token is None else written.replace(token[1:-1], b"TOKEN")


class Untouchable(Mapping[str, Any]):
    """A mapping whose every use fails the test: a ``NOT_READ`` field that was read."""

    def __init__(self, field: str) -> None:
        self.field = field

    def __getitem__(self, key: str) -> Any:
        raise AssertionError(f"ClusterState.{self.field} was read: {key!r}")

    def __iter__(self) -> Iterator[str]:
        raise AssertionError(f"ClusterState.{self.field} was iterated")

    def __len__(self) -> int:
        raise AssertionError(f"ClusterState.{self.field} was measured")

    def __bool__(self) -> bool:
        raise AssertionError(f"ClusterState.{self.field} was tested")


@pytest.mark.parametrize("name", POD_CREATES)
def test_ignored_state_fields_are_never_read(name: str) -> None:
    for _, engine in states():
        review = selected(name)
        validate = validating(review, engine)
        untouchable: dict[str, Any] = {field: Untouchable(field) for field in NOT_READ}
        state = dataclasses.replace(engine.state(), **untouchable)
        engine.state = lambda state=state: state  # type: ignore[misc]
        pairs: list[tuple[Endpoint, dict[str, Any]]] = [("mutate", review), ("validate", validate)]
        for endpoint, original in pairs:
            fresh(original, endpoint, engine)  # raises when a NOT_READ field is used


NOT_READ_ELSEWHERE = {
    "webhook/governance/policy.py": "judges PodSnapshotPolicy objects (cross-workload), not pods"
}


def test_no_module_the_pod_handler_imports_reads_an_ignored_state_field() -> None:
    """A guard for new code: the review test above only sees the paths the reviews take."""
    graph = grimp.build_graph("webhook", cache_dir=None)
    modules = graph.find_upstream_modules("webhook.admission.pods") | {"webhook.admission.pods"}
    found = []
    for module in sorted(modules):
        path = ROOT / (module.replace(".", "/") + ".py")
        if not path.exists():
            path = ROOT / module.replace(".", "/") / "__init__.py"
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in NOT_READ
                and where not in NOT_READ_ELSEWHERE
            ):
                found.append(f"{where}:{node.lineno}: .{node.attr}")
    assert found == []


def test_an_unselected_pod_in_a_policy_namespace_is_not_remembered() -> None:
    engine = cluster_engine()
    review = selected("03")
    review["request"]["object"]["metadata"]["labels"]["app"] = "web"  # llm-policy: app=llm
    assert admit(request_of(review), "mutate", engine).patch == ()
    assert memo(engine).hits == memo(engine).misses == 0
    assert len(memo(engine)) == 0


def test_a_later_replica_is_a_hit_equal_to_a_fresh_decision() -> None:
    engine = cluster_engine()
    review = selected("40")
    pairs: list[tuple[Endpoint, dict[str, Any]]] = [
        ("mutate", review), ("validate", validating(review, engine))
    ]  # fmt: skip
    for endpoint, original in pairs:
        memo(engine).clear()
        first = admit(request_of(original), endpoint, engine)
        hits = memo(engine).hits
        replica = renamed(original, 7)
        later = admit(request_of(replica), endpoint, engine)
        assert memo(engine).hits == hits + 1
        assert later == fresh(replica, endpoint, cluster_engine())
        assert untokened(later, token_of(replica)) == untokened(first, token_of(original))
    assert first.patch == () and later.allowed  # /validate never patches


def test_a_later_replica_gets_its_own_token_volume_in_the_patch() -> None:
    """With injection on, the helpers' init container mounts the pod's token volume."""
    engine = cluster_engine()
    first = admit(request_of(renamed(selected("40"), 1)), "mutate", engine)
    later = admit(request_of(renamed(selected("40"), 2)), "mutate", engine)
    assert memo(engine).hits == 1
    assert b'"kube-api-access-00001"' in orjson.dumps(first.patch)
    assert b'"kube-api-access-00002"' in orjson.dumps(later.patch)
    assert b"kube-api-access-00001" not in orjson.dumps(later.patch)


def test_mutate_and_validate_of_one_pod_are_separate_entries() -> None:
    engine = cluster_engine()
    request = request_of(selected("03"))
    mutated = admit(request, "mutate", engine)
    validated = admit(request, "validate", engine)  # the unstamped pod: not-stamped
    assert mutated.patch and not validated.patch
    assert validated == fresh(selected("03"), "validate", cluster_engine())


def replaced_state(engine: Engine, **changes: Any) -> None:
    state = dataclasses.replace(engine.state(), **changes)
    engine.state = lambda: state


def test_a_change_of_another_state_part_recomputes() -> None:
    body = orjson.dumps(load_review("03"))
    engine = cluster_engine()
    review = selected("03")
    none = admit(request_of(review), "mutate", engine)
    hit_engine = with_snapshots(engine, body, match=True)
    replaced_state(engine, snapshots=hit_engine.state().snapshots)  # same engine, new snapshots
    misses = memo(engine).misses
    replica = renamed(review, 3)
    hit = admit(request_of(replica), "mutate", engine)
    assert memo(engine).misses == misses + 1
    assert untokened(hit, token_of(replica)) != untokened(none, token_of(review))
    assert hit == fresh(replica, "mutate", hit_engine)


def test_a_change_of_only_the_stamped_pods_is_a_hit() -> None:
    engine = cluster_engine()
    review = selected("03")
    first = admit(request_of(review), "mutate", engine)
    replaced_state(engine, pods={"snap/other": object()}, gke_events={}, details={"x": "y"})
    hits = memo(engine).hits
    replica = renamed(review, 4)
    later = admit(request_of(replica), "mutate", engine)
    assert memo(engine).hits == hits + 1
    assert untokened(later, token_of(replica)) == untokened(first, token_of(review))


def test_a_change_of_settings_or_rules_recomputes() -> None:
    engine = cluster_engine()
    review = selected("04")  # MIG: denied by gpu-mig
    denied = admit(request_of(review), "validate", engine)
    assert not denied.allowed
    engine.settings = make_settings(rules={"disabled": ["gpu-mig"]})
    relaxed = admit(request_of(review), "validate", engine)
    assert relaxed == fresh(review, "validate", engine) != denied
    engine.rules = ()
    assert admit(request_of(review), "validate", engine) == fresh(review, "validate", engine)


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r["request"].__setitem__("namespace", "other"),
        lambda r: r["request"]["object"]["metadata"]["labels"].__setitem__("model", "other"),
        lambda r: r["request"]["object"]["spec"]["containers"][0].__setitem__("image", "x:1"),
        lambda r: (
            r["request"]["object"]["metadata"]
            .setdefault("annotations", {})
            .__setitem__("snapready.io/inject", "false")
        ),
    ],
    ids=["namespace", "label", "image", "annotation"],
)
def test_other_content_is_a_miss(change: Any) -> None:
    engine = cluster_engine()
    admit(request_of(selected("03")), "mutate", engine)
    other = selected("03")
    change(other)
    hits = memo(engine).hits
    got = admit(request_of(other), "mutate", engine)
    assert memo(engine).hits == hits
    assert got == fresh(other, "mutate", cluster_engine())


def ordinal_pod(review: dict[str, Any], label: str, ordinal: int) -> dict[str, Any]:
    """``review``'s pod as pod ``ordinal`` of a StatefulSet ``model`` (named, not generated; the
    label holds its name), index ``ordinal`` of an Indexed Job ``model`` (generated name
    ``model-<index>-``; the label holds the index) or worker ``ordinal`` of a Kubeflow training
    job ``model`` (named ``model-worker-<index>``; the label holds the index), with the
    hostname each controller sets."""
    other = renamed(review, ordinal)
    metadata = other["request"]["object"]["metadata"]
    if label.startswith("statefulset."):
        metadata.pop("generateName")
        metadata["name"] = other["request"]["name"] = value = f"model-{ordinal}"
    elif label.startswith("training.kubeflow.org/"):  # the training operator names its pods
        metadata.pop("generateName")
        metadata["name"] = other["request"]["name"] = f"model-worker-{ordinal}"
        value = str(ordinal)
    else:
        metadata["generateName"] = f"model-{ordinal}-"
        value = str(ordinal)
    metadata["labels"][label] = value
    other["request"]["object"]["spec"]["hostname"] = f"model-{ordinal}"
    return other


@pytest.mark.parametrize(
    "label",
    [
        "statefulset.kubernetes.io/pod-name",
        "batch.kubernetes.io/job-completion-index",
        "training.kubeflow.org/replica-index",
    ],
    ids=["statefulset", "indexed-job", "kubeflow-training"],
)
def test_a_pod_labelled_unique_by_its_controller_is_not_remembered(label: str) -> None:
    """A StatefulSet's (and so a LeaderWorkerSet's), an Indexed Job's or a Kubeflow training
    job's pods each carry their own value of this label: no later pod could find their entry, so
    none is made, and none is looked up; the decision is the one an engine without a memo
    gives."""
    engine = cluster_engine()
    without_memo = dataclasses.replace(engine, replicas=None)
    for endpoint in ("mutate", "validate"):
        for ordinal in (0, 1, 1):  # a pod, the next ordinal, and that ordinal again
            review = ordinal_pod(selected("03"), label, ordinal)
            assert ReplicaMemo.key(endpoint, "snap", review["request"]["object"]) is None
            got = admit(request_of(review), endpoint, engine)
            fingerprints._memo.clear()
            assert got == admit(request_of(review), endpoint, without_memo)
    assert (len(memo(engine)), memo(engine).hits, memo(engine).misses) == (0, 0, 0)
    # the same pods without the label: remembered, and the repeat is a hit
    admit(request_of(selected("03")), "mutate", engine)
    admit(request_of(selected("03")), "mutate", engine)
    assert (len(memo(engine)), memo(engine).hits) == (1, 1)


def daemon_pod(review: dict[str, Any], node: int, *, controller: bool = True) -> dict[str, Any]:
    """``review``'s pod as a DaemonSet ``agent`` makes it for node ``gke-n-<node>``: owned by
    the DaemonSet as its controller, pinned to its node by ``matchFields`` (the controller's
    ``ReplaceDaemonSetPodNodeNameNodeAffinity``)."""
    other = renamed(review, node)
    pod = other["request"]["object"]
    pod["metadata"]["generateName"] = "agent-"
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "d-1"}
    pod["metadata"]["ownerReferences"] = [{**owner, "controller": controller}]
    term = {
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": [f"gke-n-{node}"]}]
    }
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    return other


def test_a_daemonsets_pods_are_not_remembered() -> None:
    """Each pod of a DaemonSet is pinned to its own node: no later pod could find its entry."""
    engine = cluster_engine()
    without_memo = dataclasses.replace(engine, replicas=None)
    for node in (0, 1, 1):
        review = daemon_pod(selected("03"), node)
        assert ReplicaMemo.key("mutate", "snap", review["request"]["object"]) is None
        got = admit(request_of(review), "mutate", engine)
        fingerprints._memo.clear()
        assert got == admit(request_of(review), "mutate", without_memo)
    assert (len(memo(engine)), memo(engine).hits, memo(engine).misses) == (0, 0, 0)
    # owned by a DaemonSet that is not its controller: keyed as any pod
    owned = daemon_pod(selected("03"), 0, controller=False)
    assert ReplicaMemo.key("mutate", "snap", owned["request"]["object"]) is not None


def test_bounded_least_recently_used_out() -> None:
    bounded = ReplicaMemo(size=2)
    state, parts = ClusterState(), ()
    pods: list[RawObject] = [{"metadata": {"labels": {"n": str(i)}}} for i in range(3)]
    keys = [bounded.key("mutate", "snap", pod) for pod in pods]
    assert None not in keys and len({k.raw for k in keys if k}) == 3
    a, b, c = (k for k in keys if k is not None)
    decision = admit(request_of(selected("01")), "mutate", cluster_engine())
    assert bounded.put(a, state, parts, decision) and bounded.put(b, state, parts, decision)
    assert bounded.get(a, state, parts) is decision
    bounded.put(c, state, parts, decision)
    assert bounded.get(b, state, parts) is None
    assert bounded.get(a, state, parts) is decision


def test_replicas_with_other_token_volumes_share_a_key() -> None:
    review = selected("40")
    pods = [renamed(review, n)["request"]["object"] for n in (1, 2)]
    first, second = (ReplicaMemo.key("mutate", "snap", pod) for pod in pods)
    assert first is not None and second is not None
    assert first.raw == second.raw and first.token != second.token
    assert first.token == b'"kube-api-access-00001"'
    other = copy.deepcopy(pods[0])
    other["spec"]["containers"][0]["volumeMounts"][0]["name"] = "kube-api-access-00002"
    third = ReplicaMemo.key("mutate", "snap", other)  # a mount of another volume: another pod
    assert third is not None and third.raw != first.raw


def test_no_key_when_the_token_name_or_the_placeholder_is_also_a_value() -> None:
    """An env value equal to the token volume's name is hashed into the fingerprint: renaming
    it with the volume would give the next replica another pod's spec-hash."""
    pod = renamed(selected("40"), 1)["request"]["object"]
    assert ReplicaMemo.key("mutate", "snap", pod) is not None
    for value in ("kube-api-access-00001", "kube-api-access-\x00"):
        other = copy.deepcopy(pod)
        other["spec"]["containers"][0]["env"] = [{"name": "X", "value": value}]
        assert ReplicaMemo.key("mutate", "snap", other) is None, value


def test_a_volume_only_named_like_the_token_keeps_its_name_in_the_key() -> None:
    """An emptyDir called ``kube-api-access-aaaaa`` is hashed into the fingerprint (only the
    projected token volume is left out): two such pods are two templates (new-user trial)."""
    engine = cluster_engine()
    pods = []
    for suffix in ("aaaaa", "bbbbb"):
        review = selected("40")
        spec = review["request"]["object"]["spec"]
        spec["volumes"] = [{"name": f"kube-api-access-{suffix}", "emptyDir": {}}]
        spec["containers"][0]["volumeMounts"] = [
            {"name": f"kube-api-access-{suffix}", "mountPath": "/data"}
        ]
        pods.append(review)
    first, second = (ReplicaMemo.key("mutate", "snap", r["request"]["object"]) for r in pods)
    assert first is not None and second is not None
    assert first.token is None and first.raw != second.raw
    hashes = []
    for review in pods:
        decision = admit(request_of(review), "mutate", engine)
        hashes.append(orjson.dumps(decision.patch))
    assert hashes[1] == orjson.dumps(fresh(pods[1], "mutate", cluster_engine()).patch)
    assert hashes[0] != hashes[1]


def test_memory_is_bounded_in_bytes_not_only_entries() -> None:
    """A tenant writes pods as big as it likes: 1 MB of ``args`` each (new-user trial)."""
    bounded = ReplicaMemo(size=256, max_bytes=1 << 20)
    state = ClusterState()
    decision = denied("no")
    pod: RawObject = {"metadata": {}, "spec": {"containers": [{"args": ["x" * 40_000]}]}}
    keys = []
    for number in range(100):
        pod["metadata"] = {"labels": {"n": str(number)}}
        key = bounded.key("mutate", "snap", pod)
        assert key is not None
        assert bounded.put(key, state, (), decision)
        keys.append(key)
    assert 20 <= len(bounded) <= 26  # ~40 KB each within 1 MiB, the newest kept
    assert bounded.get(keys[-1], state, ()) is decision
    assert bounded.get(keys[0], state, ()) is None
    huge: RawObject = {"metadata": {}, "spec": {"containers": [{"args": ["x" * 70_000]}]}}
    big = bounded.key("mutate", "snap", huge)
    assert big is not None and not bounded.put(big, state, (), decision)  # over 1/16 of it


def test_a_new_state_part_forgets_every_entry() -> None:
    """Entries never keep an old state's objects (an old snapshot index) alive."""
    engine = cluster_engine()
    admit(request_of(selected("03")), "mutate", engine)
    admit(request_of(selected("40")), "mutate", engine)
    assert len(memo(engine)) == 2
    replaced_state(engine, nodes={})  # another object for one state part
    admit(request_of(selected("03")), "mutate", engine)
    assert len(memo(engine)) == 1


def test_a_decision_naming_the_token_volume_is_not_remembered() -> None:
    replicas = ReplicaMemo()
    pod = renamed(selected("40"), 1)["request"]["object"]
    key = replicas.key("validate", "snap", pod)
    assert key is not None and key.token is not None
    naming = denied("spec.volumes[0]: volume kube-api-access-00001 is not allowed here")
    state = ClusterState()
    assert not replicas.put(key, state, (), naming)
    assert replicas.get(key, state, ()) is None
    assert replicas.put(key, state, (), denied("spec.volumes[0] is not allowed here"))


def test_only_engines_over_admission_review_json_remember() -> None:
    """``snapready check`` reads YAML, whose ``.nan`` orjson writes like ``null``: its engine
    (and ``status``'s) has no memo; the server's and ``review``'s have one."""
    from webhook.cli.check import offline_engine  # noqa: PLC0415

    assert offline_engine(make_settings(), ClusterState()).replicas is None
    assert Engine(settings=make_settings(), state=ClusterState).replicas is None
    assert build_engine(make_settings()).replicas is not None


def test_no_key_without_metadata_or_for_values_json_never_holds() -> None:
    assert ReplicaMemo.key("mutate", "snap", {"spec": {}}) is None
    assert ReplicaMemo.key("mutate", "snap", {"metadata": {}, "spec": {"x": 2**70}}) is None


IDENTITY_LITERALS = IDENTITY_FIELDS - {"name"}
"""``name`` is also every container's, volume's and env var's name: the review test covers it."""
DECIDING = ["rules", "mutation", "pod"]
DECIDING_MODULES = ["admission/pods.py", "admission/context.py", "admission/decision.py"]


def test_no_deciding_module_names_an_identity_field() -> None:
    """No string literal of an identity field in what decides a pod (a guard for new code)."""
    package = ROOT / "webhook"
    files = [f for d in DECIDING for f in (package / d).rglob("*.py")]
    files += [package / m for m in DECIDING_MODULES]
    found = [
        f"{Path(f).relative_to(ROOT)}:{node.lineno}: {node.value!r}"
        for f in files
        for node in ast.walk(ast.parse(Path(f).read_text()))
        if isinstance(node, ast.Constant) and node.value in IDENTITY_LITERALS
    ]
    assert found == []
