"""``hash-drift`` (``webhook/rules/drift.py``): the stamped fingerprint against the final pod.

The final pod is what the validating webhook sees after every mutating webhook ran; here it is
review 03 after snapready's own patch, then edited the way a later webhook would.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import load_review, make_settings
from tests.mutation.test_mutation import HASH_KEY, apply, engine_for, run
from webhook.base.types import RawObject
from webhook.kube.matching import LabelSelector, Policy
from webhook.pod.context import PodContext
from webhook.rules import RULES
from webhook.rules.drift import HashDrift
from webhook.snapshots.state import ClusterState

WHOLE_POD = Policy("llm-policy", "snap", LabelSelector(), "snapshots")
ROOTFS_ONLY = Policy("rootfs", "snap", LabelSelector(), "snapshots", scope="rootfs-only")


def stamped_pod() -> RawObject:
    """Review 03's pod as snapready's mutating webhook left it."""
    review = load_review("03")
    return apply(review["request"]["object"], run(review, engine_for()))


def view(pod: RawObject, *, kind: str = "Pod", policy: Policy = WHOLE_POD) -> PodContext:
    """The validating view of ``pod``."""
    return PodContext(
        spec=pod["spec"],
        metadata=pod["metadata"],
        spec_path="spec",
        metadata_path="metadata",
        namespace="snap",
        kind=kind,
        policies=(policy,),
        settings=make_settings(),
        cluster=ClusterState(),
        mode="enforce",
    )


def set_image(pod: RawObject) -> None:
    pod["spec"]["containers"][0]["image"] = "registry.example/sidecar-injected@sha256:" + "6" * 64


def add_sidecar(pod: RawObject) -> None:
    pod["spec"]["initContainers"].append({"name": "late", "image": "x", "restartPolicy": "Always"})


def add_env(pod: RawObject) -> None:
    pod["spec"]["containers"][0]["env"].append({"name": "LATE", "value": "1"})


def set_annotation(value: str) -> Callable[[RawObject], None]:
    def edit(pod: RawObject) -> None:
        pod["metadata"]["annotations"][HASH_KEY] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "drifted"),
    [
        pytest.param(lambda pod: None, False, id="untouched-pod-has-no-drift"),
        pytest.param(set_image, True, id="image-changed-by-a-later-webhook-drifts"),
        pytest.param(add_sidecar, True, id="sidecar-added-by-a-later-webhook-drifts"),
        pytest.param(add_env, False, id="env-is-not-hashed-so-no-drift"),
        pytest.param(set_annotation("v1:sha256:" + "0" * 64), True, id="forged-annotation-drifts"),
        pytest.param(
            set_annotation("v9:other-algorithm"), False, id="other-fingerprint-version-is-skipped"
        ),
    ],
)
def test_hash_drift(edit: Callable[[RawObject], None], drifted: bool) -> None:
    pod = stamped_pod()
    edit(pod)
    findings = list(HashDrift()(view(pod)))
    assert bool(findings) == drifted
    for finding in findings:
        assert finding.rule == "hash-drift"
        assert finding.severity == "warn"
        assert finding.path == 'metadata.annotations["snapready.io/spec-hash"]'
        assert "reinvocationPolicy" in finding.message


@pytest.mark.parametrize(
    ("kwargs", "strip"),
    [
        pytest.param({"policy": ROOTFS_ONLY}, False, id="rootfs-only-policies-are-not-hashed"),
        pytest.param({"kind": "Deployment"}, False, id="pod-templates-are-not-stamped"),
        pytest.param({}, True, id="pod-without-the-annotation"),
    ],
)
def test_no_finding_where_the_hash_does_not_apply(kwargs: dict[str, Any], strip: bool) -> None:
    pod = stamped_pod()
    set_image(pod)
    if strip:
        del pod["metadata"]["annotations"][HASH_KEY]
    assert list(HashDrift()(view(pod, **kwargs))) == []


def test_hash_drift_is_the_last_rule_and_warns_through_validate() -> None:
    assert isinstance(RULES[-1], HashDrift)
    review = load_review("03")
    pod = stamped_pod()
    set_image(pod)
    review["request"]["object"] = copy.deepcopy(pod)
    decision = run(review, engine_for(), endpoint="validate")
    assert any(line.startswith("[hash-drift] ") for line in decision.warnings)
