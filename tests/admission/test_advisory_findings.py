"""The two advisory warnings of the template handler are findings too: ``rollout-cold-start``
(a Deployment whose template no Ready snapshot of its policy would restore) and
``selection-depends-on-pod`` (a template whose selection depends on a label value its controller
sets per pod). Both keep the text users saw before they were findings, byte for byte; both are
governed by ``rules.disabled`` (dropped: no warning, nothing recorded) and ``rules.modes``
(``audit``: no warning, recorded with outcome ``audit``); neither ever denies (``warn``
severity), whatever the mode.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tests.admission.test_mutate_findings import cluster_engine, prefill_pod
from tests.mutation.test_mutation import engine_for, make_review, run
from webhook.admission.audit import judge
from webhook.admission.engine import Engine
from webhook.base.types import RawObject
from webhook.kube.responses import Decision
from webhook.mutation import as_admitted
from webhook.pod.distill import fingerprint
from webhook.snapshots.index import SnapshotIndex

ROLLOUT = (
    "this rollout will cold-start: 1 Ready snapshot(s) of llm-policy differ "
    "(closest snap-1: the spec fingerprint differs)"
)
DEPENDS = (
    "PodSnapshotPolicy first-replica selects pods by the value of "
    "statefulset.kubernetes.io/pod-name, which the controller sets per pod: whether it selects "
    "this template's pods depends on the pod, so the template was not judged against it"
)
APPS = {"group": "apps", "version": "v1"}


def deployment() -> RawObject:
    """``Deployment prefill`` in ``snap`` whose template is ``prefill_pod``'s."""
    spec = {**copy.deepcopy(prefill_pod()["spec"]), "runtimeClassName": "gvisor"}
    template = {"metadata": {"labels": {"app": "llm"}}, "spec": spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "prefill", "namespace": "snap"},
        "spec": {"selector": {"matchLabels": {"app": "llm"}}, "template": template},
    }


def review_of(obj: RawObject, kind: str, resource: str) -> RawObject:
    """A CREATE review of ``obj`` (kind ``apps/v1 <kind>``)."""
    return make_review(
        obj,
        kind={**APPS, "kind": kind},
        resource={**APPS, "resource": resource},
        requestKind={**APPS, "kind": kind},
        requestResource={**APPS, "resource": resource},
        name=obj["metadata"]["name"],
        namespace="snap",
        operation="CREATE",
    )


def rollout(**rules: Any) -> Decision:
    """``/validate`` of ``deployment()`` while the only Ready snapshot of its policy differs
    (``cluster_engine(hit=False)``: another fingerprint than any of this template's)."""
    engine = cluster_engine(hit=False, rules=rules)
    return run(review_of(deployment(), "Deployment", "deployments"), engine, "validate")


def matching_engine() -> Engine:
    """An engine whose only Ready snapshot was taken from a pod of ``deployment()`` as admitted
    (the fingerprint the template's pods get: injection replayed, ``mutation.as_admitted``)."""
    base = cluster_engine(hit=False)
    template = deployment()["spec"]["template"]
    pod = as_admitted({"metadata": template["metadata"], "spec": template["spec"]}, base.settings)
    state = base.state()
    view = state.snapshots.named("snap", "snap-1")
    assert view is not None and view.origin is not None
    origin = dataclasses.replace(view.origin, spec_hash=fingerprint(pod))
    index = SnapshotIndex.build([dataclasses.replace(view, origin=origin)])
    moved = dataclasses.replace(state, snapshots=index)
    return Engine(settings=base.settings, state=lambda: moved, governance=base.governance)


def recorded(decision: Decision) -> list[tuple[str, str]]:
    """(rule id, outcome) of every advisory finding the decision recorded (the template's
    rule-table findings, e.g. ``machine-unpinned``, left out)."""
    findings = decision.audit.get("findings", ())
    pairs = zip(findings, decision.audit.get("outcomes", ()), strict=True)
    return [(f.rule, o) for f, o in pairs if f.rule in ADVISORY]


def advisory(decision: Decision) -> tuple[str, ...]:
    """The advisory warning lines: the rule table's read ``[rule] path: message``, these not."""
    return tuple(w for w in decision.warnings if not w.startswith("["))


ADVISORY = ("rollout-cold-start", "selection-depends-on-pod")


@pytest.mark.parametrize(
    ("rules", "warnings", "found"),
    [
        pytest.param({}, (ROLLOUT,), [("rollout-cold-start", "warn")], id="warns-as-before"),
        pytest.param({"disabled": ["rollout-cold-start"]}, (), [], id="disabled-says-nothing"),
        pytest.param(
            {"modes": {"rollout-cold-start": "audit"}},
            (),
            [("rollout-cold-start", "audit")],
            id="mode-audit-only-records-it",
        ),
        pytest.param(
            {"modes": {"rollout-cold-start": "enforce"}},
            (ROLLOUT,),
            [("rollout-cold-start", "warn")],
            id="mode-enforce-still-only-warns",
        ),
    ],
)
def test_rollout_cold_start_is_a_governed_finding(
    rules: dict[str, Any], warnings: tuple[str, ...], found: list[tuple[str, str]]
) -> None:
    decision = rollout(**rules)
    assert decision.allowed
    assert advisory(decision) == warnings
    assert recorded(decision) == found


def test_no_rollout_finding_when_the_template_would_restore() -> None:
    """A hit (the template's fingerprint is the snapshot's) says nothing."""
    engine = matching_engine()
    decision = run(review_of(deployment(), "Deployment", "deployments"), engine, "validate")
    assert decision.allowed and advisory(decision) == ()
    assert recorded(decision) == []


def test_the_audit_reports_the_rollout_finding_as_a_warning() -> None:
    """The audit says what admission says: the Deployment's report carries a ``warn`` result
    for ``rollout-cold-start``; disabled, it is not there."""
    for rules, expected in (({}, True), ({"disabled": ["rollout-cold-start"]}, False)):
        engine = cluster_engine(hit=False, rules=rules)
        obj = deployment()
        obj["metadata"]["uid"] = "0b7c0d5e-0000-4000-8000-000000000009"
        judgement = judge(obj, "apps/v1", "Deployment", engine)
        assert judgement is not None
        results = {r.rule: r.result for r in judgement.results}
        assert (results.get("rollout-cold-start") == "warn") is expected
        assert not judgement.denied


POLICY = """\
apiVersion: podsnapshot.gke.io/v1
kind: PodSnapshotPolicy
metadata: {name: first-replica, namespace: snap}
spec:
  storageConfigName: acme-snapshots
  selector: {matchLabels: {statefulset.kubernetes.io/pod-name: web-0}}
  triggerConfig: {type: manual}
"""


def statefulset() -> RawObject:
    """``StatefulSet web`` in ``snap``: its pods get ``statefulset.kubernetes.io/pod-name``."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "snap"},
        "spec": {
            "serviceName": "web",
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }


def depends(tmp_path: Path, **rules: Any) -> Decision:
    """``/validate`` of ``statefulset()`` under the ``first-replica`` policy."""
    (tmp_path / "policy.yaml").write_text(POLICY)
    engine: Engine = engine_for(tmp_path, rules=rules)
    return run(review_of(statefulset(), "StatefulSet", "statefulsets"), engine, "validate")


@pytest.mark.parametrize(
    ("rules", "warnings", "found"),
    [
        pytest.param({}, (DEPENDS,), [("selection-depends-on-pod", "warn")], id="warns-as-before"),
        pytest.param({"disabled": ["selection-depends-on-pod"]}, (), [], id="disabled"),
        pytest.param(
            {"modes": {"selection-depends-on-pod": "audit"}},
            (),
            [("selection-depends-on-pod", "audit")],
            id="mode-audit-only-records-it",
        ),
        pytest.param(
            {"modes": {"selection-depends-on-pod": "enforce"}},
            (DEPENDS,),
            [("selection-depends-on-pod", "warn")],
            id="mode-enforce-still-only-warns",
        ),
    ],
)
def test_selection_depends_on_pod_is_a_governed_finding(
    tmp_path: Path, rules: dict[str, Any], warnings: tuple[str, ...], found: list[tuple[str, str]]
) -> None:
    decision = depends(tmp_path, **rules)
    assert decision.allowed
    assert advisory(decision) == warnings
    assert recorded(decision) == found


def test_the_depends_finding_points_at_the_templates_labels(tmp_path: Path) -> None:
    """The finding names the labels the policy would read: the template's, where a CI
    annotation (SARIF, ``check``) points, not the StatefulSet's own ``metadata.labels``."""
    findings = depends(tmp_path).audit["findings"]
    assert [f.path for f in findings if f.rule == "selection-depends-on-pod"] == [
        "spec.template.metadata.labels"
    ]
