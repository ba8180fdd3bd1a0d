"""A gated pod's placement update, judged again (``admission.gated``; the chart's
``scheduling.snapready.io`` webhook, ``tests/e2e/test_scheduling_gates.py`` on a real API
server)."""

from __future__ import annotations

import copy
from typing import Any

from tests.conftest import make_settings
from webhook.admission.engine import admit
from webhook.admission.gated import placement_changed
from webhook.kube.review import AdmissionRequest
from webhook.server.runner import build_engine

POD: dict[str, Any] = {
    "metadata": {"name": "p", "namespace": "snap", "labels": {"app": "llm"}},
    "spec": {
        "runtimeClassName": "gvisor",
        "schedulingGates": [{"name": "example.com/flavor"}],
        "containers": [{"name": "c", "image": "nginx@sha256:" + "a" * 64}],
    },
}


def update(new: dict[str, Any], old: dict[str, Any] = POD) -> AdmissionRequest:
    return AdmissionRequest.model_validate(
        {
            "uid": "u1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "snap",
            "operation": "UPDATE",
            "object": new,
            "oldObject": old,
            "userInfo": {"username": "kueue"},
        }
    )


def with_spec(**fields: Any) -> dict[str, Any]:
    pod = copy.deepcopy(POD)
    pod["spec"].update(fields)
    return pod


def test_only_a_gated_pods_placement_changes_count() -> None:
    assert placement_changed(update(with_spec(nodeSelector={"a": "b"})))
    assert placement_changed(update(with_spec(tolerations=[{"key": "k", "operator": "Exists"}])))
    labelled = copy.deepcopy(POD)
    labelled["metadata"]["labels"]["x"] = "y"
    assert not placement_changed(update(labelled)), "not a placement"
    ungated = with_spec(nodeSelector={"a": "b"})
    ungated["spec"].pop("schedulingGates")
    old = copy.deepcopy(ungated)
    old["spec"]["nodeSelector"] = {}
    assert not placement_changed(update(ungated, old)), "only a gated pod's placement may change"


def test_the_update_is_denied_only_for_what_it_brings() -> None:
    """``machine-family: e2`` is denied (as at CREATE); a new placement the rules accept, and
    the findings the pod already had before the change, are not held against it."""
    engine = build_engine(make_settings())
    e2 = admit(
        update(with_spec(nodeSelector={"cloud.google.com/machine-family": "e2"})),
        "validate",
        engine,
    )
    assert not e2.allowed and "machine-family" in str(e2.message)
    n2 = admit(
        update(with_spec(nodeSelector={"cloud.google.com/machine-family": "n2"})),
        "validate",
        engine,
    )
    assert n2.allowed
    before = with_spec(nodeSelector={"cloud.google.com/machine-family": "e2"})
    more = with_spec(nodeSelector={"cloud.google.com/machine-family": "e2", "zone": "a"})
    assert admit(update(more, before), "validate", engine).allowed, "e2 was there before"
    web = with_spec(nodeSelector={"cloud.google.com/machine-family": "e2"})
    web["metadata"]["labels"] = {"app": "web"}
    old_web = copy.deepcopy(POD)
    old_web["metadata"]["labels"] = {"app": "web"}
    assert admit(update(web, old_web), "validate", engine).allowed, "no policy selects it"
