"""Regressions from testing reported admission-webhook bugs against snapready (issue "Blast
radius", item 5): kind contradictions, mode precedence across policies, unstamped pods at
``/validate``, natural order of findings, integers beyond 64 bits."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import orjson
import pytest

from tests.conftest import load_review, make_settings
from tests.rules.test_table import ready_pod
from webhook.admission.engine import Engine, admit
from webhook.kube.matching import Policy, PolicyIndex, compile_selector
from webhook.kube.responses import finalize
from webhook.kube.review import AdmissionRequest, parse_review
from webhook.server.runner import build_engine
from webhook.snapshots.state import ClusterState


def request_for(obj: dict[str, Any], kind: str = "Pod", group: str = "") -> AdmissionRequest:
    """A CREATE request in namespace ``snap`` claiming ``kind``."""
    version = "v1"
    return AdmissionRequest.model_validate(
        {
            "uid": "u-1",
            "kind": {"group": group, "version": version, "kind": kind},
            "namespace": "snap",
            "operation": "CREATE",
            "object": obj,
        }
    )


# --- kind contradicting request.kind --------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_object_of_another_kind_than_request_kind_is_a_400_review(endpoint: str) -> None:
    deployment = load_review("13")["request"]["object"]
    deployment["spec"]["template"]["metadata"]["labels"] = {"app": "llm"}
    deployment["metadata"]["labels"] = {"app": "llm"}
    decision = admit(request_for(deployment), endpoint, build_engine(make_settings()))  # type: ignore[arg-type]
    wire = finalize(decision, uid="u-1", api_version="admission.k8s.io/v1")
    response = wire["response"]
    assert response["uid"] == "u-1" and response["allowed"] is False
    assert response["status"]["code"] == 400
    assert "Deployment" in response["status"]["message"] and "patch" not in response


def test_object_api_version_contradicting_request_kind_is_a_400() -> None:
    pod = ready_pod()
    pod["apiVersion"] = "apps/v1"
    decision = admit(request_for(pod), "mutate", build_engine(make_settings()))
    assert (decision.allowed, decision.code) == (False, 400)
    assert "apps/v1" in (decision.message or "")


def test_object_without_kind_fields_is_judged_as_before() -> None:
    pod = ready_pod()
    del pod["kind"], pod["apiVersion"]
    assert admit(request_for(pod), "mutate", build_engine(make_settings())).allowed


# --- mode precedence ------------------------------------------------------------------------


def policy(name: str, enforcement: str | None) -> Policy:
    return Policy(
        name,
        "snap",
        compile_selector({"matchLabels": {"app": "llm"}}),
        "s",
        enforcement=enforcement,
    )


def engine_with(policies: list[Policy], namespace_mode: str | None = None) -> Engine:
    labels = {"snap": {"snapready.io/enforcement": namespace_mode}} if namespace_mode else {}
    state = ClusterState(policies=PolicyIndex.build(policies), namespace_labels=labels, synced=True)
    engine = Engine(settings=make_settings(), state=lambda: state)
    engine.offline = True
    return engine


def broken_pod() -> dict[str, Any]:
    pod = ready_pod()
    pod["spec"]["runtimeClassName"] = "runc"  # gvisor-runtime: deny
    return pod


@pytest.mark.parametrize(
    ("policies", "namespace_mode", "allowed"),
    [
        pytest.param(
            [policy("a", None), policy("b", "warn")],
            None,
            False,
            id="warn-policy-does-not-relax-an-unannotated-policy-under-global-enforce",
        ),
        pytest.param(
            [policy("a", None), policy("b", "warn")],
            "warn",
            True,
            id="unannotated-policy-follows-its-warn-namespace",
        ),
        pytest.param(
            [policy("a", "audit"), policy("b", "enforce")],
            "warn",
            False,
            id="strictest-annotation-wins",
        ),
        pytest.param([policy("a", "warn")], None, True, id="single-warn-policy-only-warns"),
        pytest.param(
            [policy("a", "bogus")], "audit", True, id="invalid-annotation-falls-back-to-namespace"
        ),
    ],
)
def test_each_selecting_policy_contributes_its_own_mode(
    policies: list[Policy], namespace_mode: str | None, allowed: bool
) -> None:
    decision = admit(request_for(broken_pod()), "validate", engine_with(policies, namespace_mode))
    assert decision.allowed is allowed


# --- not-stamped ----------------------------------------------------------------------------


def test_selected_pod_reaching_validate_without_spec_hash_is_warned() -> None:
    engine = build_engine(make_settings())
    decision = admit(request_for(ready_pod()), "validate", engine)
    assert decision.allowed
    assert any(w.startswith("[not-stamped] ") for w in decision.warnings), decision.warnings


def test_stamped_pod_and_offline_check_get_no_not_stamped_warning() -> None:
    engine = build_engine(make_settings())
    review = load_review("03")
    mutated = admit(parse_review(orjson.dumps(review)).request, "mutate", engine)
    pod = jsonpatch.apply_patch(review["request"]["object"], list(mutated.patch))
    assert "snapready.io/spec-hash" in pod["metadata"]["annotations"]
    final = {**review, "request": {**review["request"], "object": pod}}
    request = parse_review(orjson.dumps(final))
    stamped = admit(request.request, "validate", engine)
    assert not any("not-stamped" in w for w in stamped.warnings)
    engine.offline = True
    offline = admit(request_for(ready_pod()), "validate", engine)
    assert not any("not-stamped" in w for w in offline.warnings)


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        pytest.param("hunter2", "not-stamped", id="not-a-fingerprint"),
        pytest.param("v1:sha256:" + "A" * 64, "not-stamped", id="upper-case-hex"),
        pytest.param("v1:sha256:" + "0" * 63, "not-stamped", id="short"),
        pytest.param("", "not-stamped", id="empty"),
        pytest.param("v9:sha256:" + "0" * 64, "not-stamped", id="a-version-snapready-never-wrote"),
        pytest.param("v1:sha256:" + "0" * 64, "not-stamped", id="right-shape-but-no-label"),
        pytest.param("v1:sha256:" + "0" * 64, "hash-drift", id="both-stamps-wrong-hash"),
    ],
)
def test_a_spec_hash_set_by_hand_does_not_hide_a_skipped_mutating_webhook(
    request: pytest.FixtureRequest, value: str, rule: str
) -> None:
    # A tenant may set the annotation (and the label) on the pod it creates; when snapready's
    # /mutate was skipped (failurePolicy Ignore), only /validate can say the pod was never
    # stamped: /mutate always writes both stamps, so one alone is not snapready's.
    engine = build_engine(make_settings())
    pod = ready_pod()
    pod["metadata"].setdefault("annotations", {})["snapready.io/spec-hash"] = value
    if request.node.callspec.id == "both-stamps-wrong-hash":
        pod["metadata"].setdefault("labels", {})["snapready.io/selected"] = "true"
    decision = admit(request_for(pod), "validate", engine)
    said = {w.split("]")[0][1:]: w for w in decision.warnings}
    assert rule in said, decision.warnings
    assert ({"not-stamped", "hash-drift"} - {rule}).isdisjoint(said), "one of the two says it"
    if rule == "not-stamped":
        assert "is not snapready's" in said[rule], said[rule]
        assert said[rule].endswith("recreate the pod"), "the fix is never cut off"


def test_a_pod_over_max_containers_is_told_why_it_was_not_stamped() -> None:
    """Issue 27: snapready itself leaves such a pod unmutated; the warning must not blame
    ``failurePolicy: Ignore``."""
    engine = build_engine(make_settings(injection={"max_containers": 2}))
    pod = ready_pod()
    base = pod["spec"]["containers"][0]
    pod["spec"]["containers"] = [{**base, "name": f"c{i}"} for i in range(3)]
    mutated = admit(request_for(pod), "mutate", engine)
    assert any("more than 2 containers" in w for w in mutated.warnings), mutated.warnings
    decision = admit(request_for(pod), "validate", engine)
    stamped = [w for w in decision.warnings if w.startswith("[not-stamped] ")]
    assert stamped and "injection.max_containers" in stamped[0], decision.warnings
    assert "failurePolicy" not in stamped[0]


def test_not_stamped_can_be_disabled() -> None:
    engine = build_engine(make_settings(rules={"disabled": ["not-stamped"]}))
    decision = admit(request_for(ready_pod()), "validate", engine)
    assert not any("not-stamped" in w for w in decision.warnings)


# --- natural order --------------------------------------------------------------------------


def test_findings_are_sorted_by_path_in_natural_order() -> None:
    pod = ready_pod()
    base = pod["spec"]["containers"][0]
    pod["spec"]["containers"] = [
        {**copy.deepcopy(base), "name": f"c{i}", "image": "busybox:1"} for i in range(12)
    ]
    engine = build_engine(make_settings())
    engine.offline = True
    decision = admit(request_for(pod), "validate", engine)
    paths = [w.split("] ", 1)[1].split(":", 1)[0] for w in decision.warnings if "image-digest" in w]
    indexes = [int(p.split("[", 1)[1].split("]", 1)[0]) for p in paths]
    assert indexes == sorted(indexes) and len(indexes) >= 3, paths


# --- integers beyond 64 bits ----------------------------------------------------------------


def test_integer_beyond_64_bits_is_read_as_a_float_and_answered() -> None:
    review = load_review("03")
    body = orjson.dumps(review).replace(
        b'"nvidia.com/gpu":"4"', b'"nvidia.com/gpu":18446744073709551616', 1
    )
    assert b"18446744073709551616" in body
    parsed = parse_review(body)
    limits = parsed.request.object["spec"]["containers"][0]["resources"]["limits"]
    assert isinstance(limits["nvidia.com/gpu"], float)
    decision = admit(parsed.request, "validate", build_engine(make_settings()))
    wire = finalize(decision, uid=parsed.request.uid, api_version=parsed.api_version)
    assert wire["response"]["uid"] == parsed.request.uid
    assert wire["response"].get("status", {}).get("code") != 500
