"""``/mutate`` through the real HTTPS server (``snapready serve`` subprocess, generated CA).

The captured reviews go over TLS exactly as the API server sends them; the patch in the answer is
decoded, applied with ``jsonpatch`` and validated with ``kubernetes-validate --strict``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest

from tests.conftest import RunningServer, load_review
from webhook.pod.distill import fingerprint


def post(server: RunningServer, path: str, review: dict[str, Any]) -> dict[str, Any]:
    """POST ``review`` as JSON; return the decoded AdmissionReview answer (HTTP 200 expected)."""
    with server.client() as client:
        answer = client.post(path, json=review)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_mutate_review_03_returns_a_patch_that_applies_and_validates(
    https_server: RunningServer,
) -> None:
    review = load_review("03")
    body = post(https_server, "/mutate", review)
    response = body["response"]
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    assert response["uid"] == review["request"]["uid"]
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    pod = jsonpatch.apply_patch(review["request"]["object"], ops)
    assert kubernetes_validate.validate(pod, "1.33", strict=True)
    assert pod["spec"]["initContainers"][0]["name"] == "snapready-helpers"
    assert pod["metadata"]["annotations"]["snapready.io/spec-hash"] == fingerprint(pod)


def test_mutate_on_its_own_output_answers_without_a_patch(https_server: RunningServer) -> None:
    review = load_review("03")
    ops = json.loads(base64.b64decode(post(https_server, "/mutate", review)["response"]["patch"]))
    review["request"]["object"] = jsonpatch.apply_patch(review["request"]["object"], ops)
    response = post(https_server, "/mutate", review)["response"]
    assert response["allowed"] is True
    assert "patch" not in response
    assert "patchType" not in response


@pytest.mark.parametrize(
    ("name", "patched"),
    [
        pytest.param("21", True, id="dry-run-pod-is-patched-like-any-other"),
        pytest.param("01", False, id="pod-no-policy-selects-is-not-patched"),
        pytest.param("13", False, id="deployment-is-never-patched"),
    ],
)
def test_mutate_patches_only_selected_pods(
    https_server: RunningServer, name: str, patched: bool
) -> None:
    review = load_review(name)
    response = post(https_server, "/mutate", review)["response"]
    assert response["uid"] == review["request"]["uid"]
    assert ("patch" in response) == patched
