"""Only snapready speaks for snapready on a new pod (issue 31 deliverable 8).

A tenant creating a selected pod may write any ``snapready.io/`` key; after admission only the
keys snapready itself set for that pod remain, plus the two a user is meant to set. The key
lists are written out here from design.md "Names", not taken from the code under test.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.mutation.test_mutation import apply, container, engine_for, make_pod, make_review, run
from webhook.admission.engine import Engine

SNAPREADY_SETS_ANNOTATIONS = {"snapready.io/policy", "snapready.io/spec-hash"}
"""Annotations snapready writes on every selected pod in file mode (design.md "Names"; the
``restore-*`` prediction is written in cluster mode only)."""
SNAPREADY_SETS_LABELS = {"snapready.io/selected"}
USER_ANNOTATIONS = {"snapready.io/inject"}
"""The user's opt-out of helper injection (design.md)."""
USER_LABELS = {"snapready.io/snapshot-source"}
"""The user's mark on a manual-trigger target (design.md)."""
FORGED_ANNOTATIONS = {
    "snapready.io/restore-prediction": "hit",
    "snapready.io/restore-snapshot": "snap-of-another-tenant",
    "snapready.io/restore-reason": "trust me",
    "snapready.io/restore-outcome": "restored",
    "snapready.io/origin": '{"v":1,"pod":"x","specHash":null,"fields":{},"node":{},"group":{}}',
    "snapready.io/origin-signature": "k1:AAAA",
    "snapready.io/whatever": "x",
}
FORGED_LABELS = {"snapready.io/refresh": "true", "snapready.io/whatever": "x"}


@pytest.fixture(scope="module")
def engine() -> Engine:
    return engine_for()


def _snapready_keys(values: dict[str, Any] | None) -> set[str]:
    return {k for k in values or {} if k.startswith("snapready.io/")}


@pytest.mark.parametrize("inject", [True, False], ids=["helpers-injected", "opted-out"])
def test_a_new_pod_keeps_only_the_keys_snapready_set_and_the_user_inputs(
    engine: Engine, inject: bool
) -> None:
    annotations = dict(FORGED_ANNOTATIONS)
    if not inject:
        annotations["snapready.io/inject"] = "false"
    pod = make_pod({"containers": [container()]}, annotations=annotations)
    pod["metadata"]["labels"] = {
        "app": "llm",
        **FORGED_LABELS,
        "snapready.io/snapshot-source": "true",
        "snapready.io/selected": "false",
    }
    decision = run(make_review(pod), engine)
    assert decision.allowed
    admitted = apply(pod, decision)
    metadata = admitted["metadata"]
    expected_annotations = SNAPREADY_SETS_ANNOTATIONS | (set() if inject else USER_ANNOTATIONS)
    assert _snapready_keys(metadata["annotations"]) == expected_annotations
    assert _snapready_keys(metadata["labels"]) == SNAPREADY_SETS_LABELS | USER_LABELS
    assert metadata["labels"]["snapready.io/selected"] == "true"
    assert metadata["labels"]["app"] == "llm"


def test_a_pod_without_foreign_keys_gets_no_removal(engine: Engine) -> None:
    pod = make_pod({"containers": [container()]}, annotations={"team": "a"})
    decision = run(make_review(pod), engine)
    assert not [op for op in decision.patch if op["op"] == "remove"]
    assert apply(pod, decision)["metadata"]["annotations"]["team"] == "a"


def test_the_removal_is_idempotent_on_reinvocation(engine: Engine) -> None:
    pod = make_pod({"containers": [container()]}, annotations=dict(FORGED_ANNOTATIONS))
    first = run(make_review(pod), engine)
    again = run(make_review(apply(pod, first)), engine)
    assert again.patch == ()


def test_a_pod_over_the_container_limit_is_not_stamped_and_loses_forged_keys() -> None:
    """Over ``injection.max_containers`` nothing is injected or stamped, yet a tenant's forged
    ``selected`` label and ``restore-*`` annotations must not reach the pod cache with it."""
    engine = engine_for(injection={"max_containers": 2})
    pod = make_pod(
        {"containers": [container(f"c{i}") for i in range(3)]},
        annotations={**FORGED_ANNOTATIONS, "snapready.io/spec-hash": "v1:sha256:" + "0" * 64},
    )
    pod["metadata"]["labels"] = {"app": "llm", "snapready.io/selected": "true"}
    decision = run(make_review(pod), engine)
    assert decision.allowed
    assert any("more than 2 containers" in w for w in decision.warnings)
    admitted = apply(pod, decision)
    assert _snapready_keys(admitted["metadata"].get("annotations")) == set()
    assert _snapready_keys(admitted["metadata"]["labels"]) == set()


def test_a_pod_no_policy_selects_loses_every_snapready_key_but_the_users(engine: Engine) -> None:
    """A real-API trial: forged stamps on a pod no policy selects were kept (only selected
    pods were cleaned) and counted as a restore once the pod was relabelled into a selector.
    ``/mutate`` now removes them and says which; ``/validate`` allows the pod as before."""
    pod = make_pod({"containers": [container()]}, annotations=dict(FORGED_ANNOTATIONS))
    pod["metadata"]["annotations"] |= {"snapready.io/inject": "false", "team": "a"}
    pod["metadata"]["labels"] = {
        "app": "web",  # llm-policy selects app=llm: no policy selects this pod
        **FORGED_LABELS,
        "snapready.io/selected": "true",
        "snapready.io/snapshot-source": "true",
    }
    pod["metadata"]["annotations"]["snapready.io/spec-hash"] = "v1:sha256:" + "cd" * 32
    decision = run(make_review(pod), engine)
    assert decision.allowed
    metadata = apply(pod, decision)["metadata"]
    assert _snapready_keys(metadata["annotations"]) == USER_ANNOTATIONS
    assert _snapready_keys(metadata["labels"]) == USER_LABELS
    assert metadata["labels"]["app"] == "web" and metadata["annotations"]["team"] == "a"
    (warning,) = decision.warnings
    assert "removed snapready.io/" in warning and "and 6 more" in warning
    assert len(warning) <= 256
    assert run(make_review(pod), engine, endpoint="validate").patch == ()


def test_a_pod_no_policy_selects_without_snapready_keys_is_untouched(engine: Engine) -> None:
    pod = make_pod({"containers": [container()]}, annotations={"snapready.io/inject": "false"})
    pod["metadata"]["labels"] = {"app": "web", "snapready.io/snapshot-source": "true"}
    decision = run(make_review(pod), engine)
    assert (decision.allowed, decision.patch, decision.warnings) == (True, (), ())
