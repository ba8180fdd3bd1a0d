"""The audit's judgement (``admission.audit``): what admission would say, as report results.

The engine is the server's over the example policies (file mode: no snapshots, so no
prediction result); review 03's gVisor pod on 4 x L4 is the selected pod.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.conftest import load_review
from webhook.admission.audit import judge, rule_results, without_foreign_keys
from webhook.admission.engine import Engine
from webhook.base.types import Finding, Mode
from webhook.snapshots.audit import admitted

STAMPS = {
    "labels": {"snapready.io/selected": "true"},
    "annotations": {"snapready.io/spec-hash": "v1:sha256:" + "0" * 64},
}


def pod(**metadata: Any) -> dict[str, Any]:
    """Review 03's pod as the API server stores it (uid, namespace), with ``metadata`` added."""
    obj: dict[str, Any] = copy.deepcopy(load_review("03")["request"]["object"])
    obj["metadata"].update({"namespace": "snap", "name": "p1", "uid": "uid-1"})
    for key, values in metadata.items():
        obj["metadata"].setdefault(key, {}).update(values)
    return obj


def test_a_pod_admission_never_saw_is_judged_as_admission_would_see_it(engine: Engine) -> None:
    """Never judged: the not-stamped warning, and a forged snapready.io stamp counts for
    nothing (admission would have removed it from a new pod)."""
    forged = pod(annotations={"snapready.io/spec-hash": "v1:sha256:" + "0" * 64})
    judgement = judge(forged, "v1", "Pod", engine)
    assert judgement is not None
    assert not judgement.admitted
    rules = {r.rule: r for r in judgement.results}
    assert rules["not-stamped"].result == "warn"
    assert "hash-drift" not in rules
    assert judgement.policy == "llm-policy"
    assert {r.policy for r in judgement.results} == {"llm-policy"}


def test_a_stamped_pod_is_admitted_and_its_stamp_is_checked(engine: Engine) -> None:
    judgement = judge(pod(**STAMPS), "v1", "Pod", engine)
    assert judgement is not None and judgement.admitted
    rules = {r.rule for r in judgement.results}
    assert "not-stamped" not in rules
    assert "hash-drift" in rules  # the all-zero stamp is not this pod's fingerprint


def test_a_stamp_set_by_hand_is_not_admission(engine: Engine) -> None:
    # A tenant can create its pod with snapready's label and any spec-hash: only a value shaped
    # like a fingerprint counts as the mutating webhook's stamp, as not-stamped judges it.
    forged = pod(labels=STAMPS["labels"], annotations={"snapready.io/spec-hash": "hunter2"})
    assert not admitted(forged["metadata"], "snapready.io/")
    judgement = judge(forged, "v1", "Pod", engine)
    assert judgement is not None and not judgement.admitted
    assert {r.rule: r for r in judgement.results}["not-stamped"].result == "warn"
    assert admitted(pod(**STAMPS)["metadata"], "snapready.io/")


def test_what_admission_would_deny_fails_and_says_so(engine: Engine) -> None:
    obj = pod()
    del obj["spec"]["runtimeClassName"]
    judgement = judge(obj, "v1", "Pod", engine)
    assert judgement is not None and judgement.denied
    (runtime,) = [r for r in judgement.results if r.rule == "gvisor-runtime"]
    assert (runtime.result, runtime.severity) == ("fail", "high")
    assert dict(runtime.properties)["admission"] == "deny"
    assert runtime.message.startswith("spec.runtimeClassName: ")


def test_unselected_and_unstored_objects_get_nothing(engine: Engine) -> None:
    assert judge(pod(labels={"app": "other"}), "v1", "Pod", engine) is None
    unstored = pod()
    del unstored["metadata"]["uid"]  # a dry-run answer is stored nowhere: it has no report
    assert judge(unstored, "v1", "Pod", engine) is None


def test_a_workload_template_is_judged_without_a_prediction(engine: Engine) -> None:
    template = pod()
    deployment = {
        "metadata": {"namespace": "snap", "name": "d", "uid": "uid-d"},
        "spec": {
            "selector": {"matchLabels": template["metadata"]["labels"]},
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }
    judgement = judge(deployment, "apps/v1", "Deployment", engine)
    assert judgement is not None
    assert judgement.scope.kind == "Deployment" and judgement.scope.api_version == "apps/v1"
    assert "restore-prediction" not in {r.rule for r in judgement.results}
    assert judgement.admitted  # no creation time to compare: never guessed as never judged


@pytest.mark.parametrize(
    ("findings", "expected"),
    [
        pytest.param([], [("snapshot-ready", "pass", "info", None)], id="no-finding-one-pass"),
        pytest.param(
            [(Finding("spec.a", "r1", "m1", "deny"), "audit")],
            [("r1", "fail", "high", "audit")],
            id="a-deny-finding-fails-even-in-audit-mode",
        ),
        pytest.param(
            [(Finding("spec.a", "r1", "m1", "warn"), "warn")],
            [("r1", "warn", "medium", "warn")],
            id="a-warn-finding-warns",
        ),
        pytest.param(
            [
                (Finding("spec.a", "r1", "m1", "warn"), "warn"),
                (Finding("spec.b", "r2", "m2", "deny"), "enforce"),
                (Finding("spec.c", "r1", "m3", "deny"), "enforce"),
            ],
            [("r1", "fail", "high", "deny"), ("r2", "fail", "high", "deny")],
            id="one-result-per-rule-in-the-order-found",
        ),
    ],
)
def test_rule_results(
    findings: list[tuple[Finding, Mode]], expected: list[tuple[str, str, str, str | None]]
) -> None:
    results = rule_results("llm", [f for f, _ in findings], [o for _, o in findings])
    got = [(r.rule, r.result, r.severity, dict(r.properties).get("admission")) for r in results]
    assert got == expected


def test_one_rule_lists_every_fix_and_field() -> None:
    findings = [Finding("spec.b", "r1", "fix b", "warn"), Finding("spec.a", "r1", "fix a", "warn")]
    (item,) = rule_results("llm", findings, ["warn", "warn"])
    assert item.message == "spec.b: fix b; spec.a: fix a"
    assert dict(item.properties)["fields"] == "spec.a,spec.b"


def test_foreign_keys_go_user_inputs_stay() -> None:
    obj = pod(
        labels={"snapready.io/selected": "true", "snapready.io/snapshot-source": "true"},
        annotations={"snapready.io/inject": "false", "snapready.io/restore-outcome": "restored"},
    )
    clean = without_foreign_keys(obj, "snapready.io/")
    assert clean["metadata"]["labels"]["snapready.io/snapshot-source"] == "true"
    assert "snapready.io/selected" not in clean["metadata"]["labels"]
    ours = {k for k in clean["metadata"]["annotations"] if k.startswith("snapready.io/")}
    assert ours == {"snapready.io/inject"}
    assert "snapready.io/selected" in obj["metadata"]["labels"]  # the original is untouched
