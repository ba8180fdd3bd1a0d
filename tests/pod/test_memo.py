"""``webhook.pod.memo``: the fingerprint remembered by content, never stale, bounded.

The point of the memo (issue 16) is that ``hash-drift`` at ``/validate`` does not distill again
the pod snapready just stamped at ``/mutate``; the risk is an answer for other content.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import orjson
import pytest

from tests.conftest import load_review
from tests.mutation.test_mutation import apply, engine_for, run
from webhook.admission.context import selected_pod_context
from webhook.admission.engine import admit
from webhook.kube.review import parse_review
from webhook.mutation import run_mutators
from webhook.mutation.patch import Draft
from webhook.mutation.prediction import pod_facts
from webhook.pod import distill, memo
from webhook.pod.fields import field_digests
from webhook.pod.memo import (
    DIGESTS_MAX_FIELDS,
    DIGESTS_SIZE,
    MEMO_SIZE,
    admitted_field_digests,
    admitted_fingerprint,
    content_key,
    recorded_fingerprint,
)

INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


@pytest.fixture(autouse=True)
def empty_memo() -> None:
    memo._memo.clear()
    memo._digests.clear()


@pytest.fixture
def distills(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per ``distill.distill`` call from now on (the fingerprint's and the digests')."""
    calls: list[int] = []
    real = distill.distill

    def counting(pod: Any) -> Any:
        calls.append(1)
        return real(pod)

    monkeypatch.setattr(distill, "distill", counting)
    return calls


def pod03() -> dict[str, Any]:
    pod: dict[str, Any] = load_review("03")["request"]["object"]
    return pod


def test_same_value_as_fingerprint_first_and_second_time() -> None:
    pod = pod03()
    assert admitted_fingerprint(pod) == distill.fingerprint(pod)
    assert admitted_fingerprint(copy.deepcopy(pod)) == distill.fingerprint(pod)


@pytest.mark.parametrize(
    "edit",
    [
        lambda p: p["spec"]["containers"][0].__setitem__("image", "other@sha256:" + "1" * 64),
        lambda p: p["spec"].__setitem__("hostIPC", True),
        lambda p: p["metadata"].setdefault("annotations", {}).__setitem__("dev.gvisor.x", "1"),
        lambda p: p["metadata"]["labels"].__setitem__(
            "batch.kubernetes.io/job-completion-index", "3"
        ),
    ],
    ids=["image", "pod-field", "gvisor-annotation", "completion-index-label"],
)
def test_a_changed_hashed_field_is_computed_afresh(edit: Any) -> None:
    """Content the memo saw, then the same pod edited in place (as a later webhook would): the
    answer follows the new content, never the remembered one."""
    pod = pod03()
    before = admitted_fingerprint(pod)
    edit(pod)
    after = admitted_fingerprint(pod)
    assert after == distill.fingerprint(pod)
    assert after != before


def test_unhashed_metadata_shares_the_entry() -> None:
    """Names, other labels and annotations are not read by ``distill``: not in the key."""
    pod = pod03()
    other = copy.deepcopy(pod)
    other["metadata"]["name"] = "replica-2"
    other["metadata"]["annotations"]["snapready.io/spec-hash"] = "anything"
    assert content_key(pod) == content_key(other)


def test_bounded_oldest_first() -> None:
    pod = pod03()
    keys = []
    for index in range(MEMO_SIZE + 10):
        pod["spec"]["containers"][0]["args"] = [str(index)]
        admitted_fingerprint(pod)
        keys.append(content_key(pod))
    assert len(memo._memo) == MEMO_SIZE
    assert keys[0] not in memo._memo and keys[-1] in memo._memo


@pytest.mark.parametrize(
    "odd",
    [
        {"spec": {"containers": [{"name": "a", "args": [2**70]}]}},  # beyond int64: orjson refuses
        {"metadata": {"annotations": {"dev.gvisor.a": "x"}}, "spec": {1: "non-string key"}},
    ],
    ids=["huge-int", "non-string-key"],
)
def test_values_orjson_cannot_write_skip_the_memo(odd: dict[str, Any]) -> None:
    assert content_key(odd) is None
    assert admitted_fingerprint(odd) == distill.fingerprint(odd)
    assert not memo._memo


def test_validate_reuses_what_mutate_computed(distills: list[int]) -> None:
    """Review 03 through /mutate, then its patched pod through /validate: one distillation."""
    calls = distills
    review = load_review("03")
    engine = engine_for()
    final = apply(review["request"]["object"], run(review, engine))
    assert len(calls) == 1
    review["request"]["object"] = final
    decision = admit(parse_review(orjson.dumps(review)).request, "validate", engine)
    assert len(calls) == 1
    assert "hash-drift" not in {f.rule for f in decision.audit["findings"]}


def test_hash_drift_never_fills_the_memo_so_a_manifest_cannot_borrow_a_value() -> None:
    """YAML's ``.nan`` and ``null`` give one key (orjson writes NaN as null); only ``/mutate``
    writes entries, so in ``snapready check`` a ``.nan`` pod still fails after a ``null`` twin
    (found by a review of issue 16's change)."""
    twin: dict[str, Any] = {
        "spec": {"securityContext": {"runAsUser": None}, "containers": [{"name": "c"}]}
    }
    nan = copy.deepcopy(twin)
    nan["spec"]["securityContext"]["runAsUser"] = float("nan")
    assert content_key(twin) == content_key(nan)
    assert recorded_fingerprint(twin) == distill.fingerprint(twin)
    assert not memo._memo
    with pytest.raises(ValueError):
        recorded_fingerprint(nan)
    admitted_fingerprint(twin)  # what /mutate stamps is read back
    assert recorded_fingerprint(copy.deepcopy(twin)) == distill.fingerprint(twin)


def test_python_values_orjson_writes_its_own_way_are_judged_by_rfc8785() -> None:
    """An enum or UUID leaf (Python callers only): orjson would write it, JCS refuses it."""
    pod = {"spec": {"containers": [{"name": "c", "command": [uuid.UUID(int=1)]}]}}
    with pytest.raises(ValueError):
        distill.fingerprint(pod)


def test_what_mutate_stamps_is_plain_json() -> None:
    """The memo is keyed by orjson bytes, which cannot tell a tuple from a list: the mutated
    pod (request JSON plus snapready's injected helpers, env and annotations) must hold JSON
    types only, or ``/mutate`` would remember a value the final pod does not have."""
    review = load_review("03")
    final = apply(review["request"]["object"], run(review, engine_for()))

    def plain(value: Any) -> bool:
        if type(value) is dict:
            return all(type(k) is str and plain(v) for k, v in value.items())
        if type(value) is list:
            return all(plain(v) for v in value)
        return type(value) in (str, int, float, bool) or value is None

    engine = engine_for()
    request = parse_review(orjson.dumps(review)).request
    ctx = selected_pod_context(request, request.object, engine)
    assert ctx is not None
    draft, changed = run_mutators(request.object, ctx, inject=True)
    assert "helpers" in changed and plain(draft.doc)
    assert final["spec"]["initContainers"][-1]["name"] == "snapready-helpers"


def test_field_digests_are_computed_once_per_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replicas of one template (one fingerprint) distill once for a miss's differing fields."""
    calls = []

    def counting(pod: Any) -> dict[str, str]:
        calls.append(1)
        return field_digests(pod)

    monkeypatch.setattr(memo, "field_digests", counting)
    pod = pod03()
    value = admitted_fingerprint(pod)
    first = admitted_field_digests(value, pod)
    second = admitted_field_digests(value, copy.deepcopy(pod))
    assert len(calls) == 1
    assert dict(first) == dict(second) == field_digests(pod)
    with pytest.raises(TypeError):
        first["spec.dnsPolicy"] = "x"  # type: ignore[index]  # shared: read-only


def test_field_digests_bounded_least_recently_used_out() -> None:
    pod = pod03()
    admitted_field_digests("kept", pod)
    for number in range(DIGESTS_SIZE):
        admitted_field_digests(f"h{number}", pod)
        admitted_field_digests("kept", pod)  # used again: stays
    assert len(memo._digests) == DIGESTS_SIZE
    assert "kept" in memo._digests and "h0" not in memo._digests


def test_a_fingerprint_the_pod_brought_never_keys_the_digests() -> None:
    """Only the value stamp_fingerprint computed keys the memo: a pod arriving with another
    pod's fingerprint in its spec-hash annotation cannot plant its digests under it."""
    review = load_review("03")
    engine = engine_for()
    request = parse_review(orjson.dumps(review)).request
    ctx = selected_pod_context(request, request.object, engine)
    assert ctx is not None
    forged = copy.deepcopy(request.object)
    forged["metadata"].setdefault("annotations", {})[ctx.settings.annotation("spec-hash")] = (
        "v1:sha256:" + "f" * 64
    )
    facts = pod_facts(Draft(forged), ctx)  # the spec-hash step did not run: no own value
    assert dict(facts.field_digests()) == field_digests(forged)
    assert not memo._digests
    draft, _ = run_mutators(request.object, ctx, inject=False)  # stamps its own fingerprint
    facts = pod_facts(draft, ctx)
    facts.field_digests()
    assert len(memo._digests) == 1 and facts.spec_hash in memo._digests


def test_a_new_templates_miss_distills_once(
    distills: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first pod of a template is distilled once for both its fingerprint and the field
    digests a prediction miss names (half of a new template's miss went to a second distill),
    and the distilled pod is kept by the request's own view only, never by the module."""
    calls = distills
    review = load_review("03")
    request = parse_review(orjson.dumps(review)).request
    ctx = selected_pod_context(request, request.object, engine_for())
    assert ctx is not None
    draft, _ = run_mutators(request.object, ctx, inject=False)
    digests = pod_facts(draft, ctx).field_digests()
    assert len(calls) == 1
    monkeypatch.undo()  # the real distill again, for the reference below
    assert dict(digests) == field_digests(draft.doc)
    assert not any(isinstance(value, distill.Distilled) for value in vars(memo).values())


def test_a_pod_with_thousands_of_hashed_fields_is_answered_but_not_kept() -> None:
    pod = pod03()
    annotations = pod["metadata"].setdefault("annotations", {})
    for number in range(DIGESTS_MAX_FIELDS + 1):
        annotations[f"dev.gvisor.x{number}"] = "v"
    value, distilled = memo.admitted(pod)
    digests = admitted_field_digests(value, pod, distilled)
    assert dict(digests) == field_digests(pod)
    assert not memo._digests
