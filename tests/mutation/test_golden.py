"""Pinned expected patches for whole captured reviews (golden files in ``tests/data/golden/``).

Any change to what is injected, to the patch layout or to the fingerprint shows up here as a
reviewed diff. To rewrite the files on purpose (then read the diff before committing):

    SNAPREADY_UPDATE_GOLDEN=1 .venv/bin/pytest tests/mutation/test_golden.py

The policies are ``tests/data/golden/policies/policies.yaml``: ``llm-policy`` (app=llm) and
``plain-policy``, which selects review 01's plain ``kubectl run`` pod (no annotations at all).
"""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import load_review
from tests.mutation.test_mutation import GOLDEN, GOLDEN_POLICIES, engine_for, run, wire_patch

UPDATE = os.environ.get("SNAPREADY_UPDATE_GOLDEN") == "1"
REVIEWS = [
    pytest.param("01-pod-create-plain-kubectl-run", id="review-01-pod-without-annotations"),
    pytest.param("03-pod-create-gvisor-l4x4-gpu4", id="review-03-gvisor-gpu-pod"),
    pytest.param("40-pod-create-by-replicaset-controller", id="review-40-replicaset-pod"),
]


@pytest.mark.parametrize("name", REVIEWS)
def test_patch_matches_the_golden_file(name: str) -> None:
    review = load_review(f"{name}.json")
    decision = run(review, engine_for(GOLDEN_POLICIES))
    ops = wire_patch(review, decision)
    golden = GOLDEN / f"{name}.patch.json"
    if UPDATE:
        golden.write_text(json.dumps(ops, indent=2, ensure_ascii=False) + "\n")
    assert golden.exists(), f"missing {golden}: run with SNAPREADY_UPDATE_GOLDEN=1 once"
    assert ops == json.loads(golden.read_text())
