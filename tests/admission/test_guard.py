"""``admission.guard``: a pod UPDATE that changes snapready's metadata, by anyone but snapready."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import make_settings
from webhook.admission.engine import admit
from webhook.admission.guard import owned_changes
from webhook.kube.review import AdmissionRequest
from webhook.server.runner import build_engine

OWNER = "system:serviceaccount:snapready:snapready"
OLD: dict[str, Any] = {
    "metadata": {
        "name": "p",
        "labels": {"app": "llm", "snapready.io/selected": "true"},
        "annotations": {"snapready.io/policy": "llm", "team": "a"},
    }
}


def changed(labels: dict[str, Any] | None = None, annotations: dict[str, Any] | None = None) -> Any:
    new = {"metadata": {k: dict(v) for k, v in OLD["metadata"].items() if k != "name"}}
    for part, edits in (("labels", labels or {}), ("annotations", annotations or {})):
        for key, value in edits.items():
            if value is None:
                new["metadata"][part].pop(key, None)
            else:
                new["metadata"][part][key] = value
    return new


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        pytest.param(changed(), [], id="nothing-changed"),
        pytest.param(changed({"app": "x"}, {"team": "b"}), [], id="other-metadata-is-free"),
        pytest.param(
            changed(annotations={"snapready.io/policy": "forged"}),
            ["annotation snapready.io/policy"],
            id="changed-annotation",
        ),
        pytest.param(
            changed(annotations={"snapready.io/restore-outcome": "restored"}),
            ["annotation snapready.io/restore-outcome"],
            id="added-annotation",
        ),
        pytest.param(
            changed(annotations={"snapready.io/policy": None}),
            ["annotation snapready.io/policy"],
            id="removed-annotation",
        ),
        pytest.param(
            changed({"snapready.io/selected": None}), ["label snapready.io/selected"], id="label"
        ),
    ],
)
def test_owned_changes(new: Any, expected: list[str]) -> None:
    assert owned_changes(OLD, new, "snapready.io/") == expected


def update(new: Any, user: str) -> AdmissionRequest:
    return AdmissionRequest.model_validate(
        {
            "uid": "u1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "ml",
            "operation": "UPDATE",
            "object": new,
            "oldObject": OLD,
            "userInfo": {"username": user},
        }
    )


def test_only_snapreadys_service_account_may_change_them() -> None:
    engine = build_engine(make_settings(ownership={"service_account": OWNER}))
    forged = changed(annotations={"snapready.io/policy": "forged"})
    decision = admit(update(forged, "system:serviceaccount:ml:editor"), "validate", engine)
    assert not decision.allowed and decision.code == 403
    assert "snapready.io/policy" in (decision.message or "")
    assert admit(update(forged, OWNER), "validate", engine).allowed
    assert admit(update(changed({"app": "x"}), "someone"), "validate", engine).allowed
    assert admit(update(forged, "someone"), "mutate", engine).allowed, "validating only"
    off = build_engine(make_settings())
    assert admit(update(forged, "someone"), "validate", off).allowed, "empty: not checked"


FORGED_DENIAL = (
    "snapready: annotation snapready.io/policy may be changed only by snapready "
    f"({OWNER}): they record what snapready decided at admission; recreate the pod to have it "
    "judged again"
)
"""The denial as users saw it before ``owned-metadata`` was a finding (byte for byte)."""


@pytest.mark.parametrize(
    ("rules", "enforcement", "message", "warnings"),
    [
        pytest.param({}, "enforce", FORGED_DENIAL, (), id="denied-by-default"),
        pytest.param({}, "audit", FORGED_DENIAL, (), id="denied-whatever-the-namespace-mode"),
        pytest.param(
            {"modes": {"owned-metadata": "warn"}}, "enforce", None, (FORGED_DENIAL,),
            id="mode-warn-admits-with-a-warning",
        ),
        pytest.param(
            {"modes": {"owned-metadata": "audit"}}, "enforce", None, (),
            id="mode-audit-only-records-it",
        ),
        pytest.param(
            {"disabled": ["owned-metadata"]}, "enforce", None, (), id="disabled-says-nothing"
        ),
    ],
)  # fmt: skip
def test_owned_metadata_follows_rules_disabled_and_modes(
    rules: dict[str, Any], enforcement: str, message: str | None, warnings: tuple[str, ...]
) -> None:
    settings = make_settings(
        ownership={"service_account": OWNER}, rules=rules, enforcement=enforcement
    )
    forged = changed(annotations={"snapready.io/policy": "forged"})
    decision = admit(update(forged, "someone"), "validate", build_engine(settings))
    assert decision.allowed == (message is None)
    assert decision.message == message
    assert decision.warnings == warnings
    recorded = [f.rule for f in decision.audit["findings"]]
    assert recorded == ([] if "disabled" in rules else ["owned-metadata"])
