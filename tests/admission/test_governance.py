"""Governance end to end: the captured reviews 33 (PodSnapshotStorageConfig) and 34
(PodSnapshotPolicy) through the admission engine, the real HTTPS server and ``snapready check``.

Buckets live in the real GCS emulator (fake-gcs-server, see ``test_gcs.py`` for what it can and
cannot express); a hardened bucket, which the emulator cannot express, is served as recorded GCS
JSON. Review 33 names bucket ``my-project-pod-snapshots``; review 34 is the example policy
``llm-policy`` (``app=llm`` in ``snap``, grouped by label ``model``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import EXAMPLES, RunningServer, load_review, make_settings
from tests.support.gcs_emulator import (
    FakeGcs,
    bucket_routes,
    create_bucket,
    recorded,
    serving_recorded,
)
from tests.support.ports import free_port
from webhook.admission.engine import Engine, admit
from webhook.admission.governance import Governance
from webhook.base.sections import RuleSettings, StorageSettings
from webhook.cli import main
from webhook.kube.matching import PolicyIndex
from webhook.kube.responses import Decision
from webhook.kube.review import AdmissionRequest
from webhook.server.runner import build_engine
from webhook.snapshots.state import ClusterState, StorageConfig

REVIEW_BUCKET = "my-project-pod-snapshots"


def ensure_bucket(gcs: FakeGcs, name: str) -> None:
    """Create ``name`` in the session's emulator unless an earlier test did."""
    try:
        create_bucket(gcs, name)
    except httpx.HTTPStatusError as exc:
        assert exc.response.status_code == 409, exc.response.text


def engine_at(
    monkeypatch: pytest.MonkeyPatch, gcs_url: str, *, rules: RuleSettings | None = None, **kw: Any
) -> Engine:
    """The server's engine (example policies) with GCS at ``gcs_url``; ``kw``: storage settings,
    plus ``enforcement``."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_url)
    enforcement = kw.pop("enforcement", "enforce")
    storage = StorageSettings(**{"cluster_location": "us-central1", **kw})
    return build_engine(
        make_settings(storage=storage, enforcement=enforcement, rules=rules or RuleSettings())
    )


def request_of(review: dict[str, Any]) -> AdmissionRequest:
    """The ``request`` of a captured review."""
    return AdmissionRequest.model_validate(review["request"])


def validate(review: dict[str, Any], engine: Engine) -> Decision:
    """Answer ``review`` on the validating endpoint."""
    return admit(request_of(review), "validate", engine)


def rules_in(decision: Decision) -> tuple[set[str], set[str]]:
    """(rule ids in the denial message, rule ids in the warnings)."""
    denied = {line.split("]")[0][3:] for line in (decision.message or "").splitlines()[1:]}
    warned = {line.split("]")[0][1:] for line in decision.warnings}
    return denied, warned


def review_33(bucket: str = REVIEW_BUCKET) -> dict[str, Any]:
    """Review 33 naming ``bucket``."""
    review = load_review("33")
    review["request"]["object"]["spec"]["snapshotStorageConfig"]["gcs"]["bucket"] = bucket
    return review


def test_review_33_on_the_emulator_denies_an_unhardened_bucket(
    monkeypatch: pytest.MonkeyPatch, fake_gcs: FakeGcs
) -> None:
    ensure_bucket(fake_gcs, REVIEW_BUCKET)
    decision = validate(load_review("33"), engine_at(monkeypatch, fake_gcs.url))
    assert not decision.allowed
    assert decision.message is not None
    assert decision.message.startswith(
        "snapready: PodSnapshotStorageConfig snapshots-us-central1 is not acceptable"
    )
    # The emulator stores no iamConfiguration, softDeletePolicy, hierarchicalNamespace or IAM.
    assert rules_in(decision) == (
        {"bucket-public-access-prevention", "bucket-uniform-access"},
        {"bucket-public-iam", "bucket-soft-delete", "bucket-hierarchical-namespace"},
    )
    assert all(not line.endswith("...") for line in decision.warnings), "messages fit 256 chars"


def test_review_33_warns_about_a_bucket_in_another_region(
    monkeypatch: pytest.MonkeyPatch, fake_gcs: FakeGcs
) -> None:
    ensure_bucket(fake_gcs, REVIEW_BUCKET)
    engine = engine_at(monkeypatch, fake_gcs.url, cluster_location="europe-west4-a")
    _, warned = rules_in(validate(load_review("33"), engine))
    assert "bucket-location" in warned


def test_review_33_denies_a_bucket_that_does_not_exist(
    monkeypatch: pytest.MonkeyPatch, fake_gcs: FakeGcs
) -> None:
    decision = validate(review_33("snapready-never-created"), engine_at(monkeypatch, fake_gcs.url))
    assert rules_in(decision) == ({"bucket-reachable"}, set())
    assert "gs://snapready-never-created does not exist" in (decision.message or "")


@pytest.mark.parametrize(
    ("strict", "allowed"),
    [
        pytest.param(False, True, id="warns-when-gcs-is-unreachable"),
        pytest.param(True, False, id="denies-when-gcs-is-unreachable-and-strict"),
    ],
)
def test_review_33_with_gcs_unreachable(
    monkeypatch: pytest.MonkeyPatch, strict: bool, allowed: bool
) -> None:
    engine = engine_at(monkeypatch, f"http://127.0.0.1:{free_port()}", strict=strict)
    decision = validate(load_review("33"), engine)
    assert decision.allowed is allowed
    assert rules_in(decision) == (
        (set(), {"bucket-reachable"}) if allowed else ({"bucket-reachable"}, set())
    )


def test_review_33_allows_a_hardened_bucket_from_recorded_gcs_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # iam-private plus the GKE service agent's objectUser binding (issue 23: without it deleted
    # PodSnapshots hang in Deleting).
    iam = recorded("iam-private-service-agent")
    routes = bucket_routes(REVIEW_BUCKET, recorded("bucket-hardened"), iam)
    with serving_recorded(routes) as gcs:
        decision = validate(load_review("33"), engine_at(monkeypatch, gcs.url))
    assert decision.allowed
    assert decision.warnings == ()


def test_bucket_without_the_gke_service_agent_is_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    routes = bucket_routes(REVIEW_BUCKET, recorded("bucket-hardened"), recorded("iam-private"))
    with serving_recorded(routes) as gcs:
        decision = validate(load_review("33"), engine_at(monkeypatch, gcs.url))
    assert decision.allowed
    [warning] = decision.warnings
    assert warning.startswith("[bucket-service-agent]")
    assert "hang in Deleting" in warning and "roles/storage.objectUser" in warning


def test_review_33_with_public_iam_from_recorded_gcs_json(monkeypatch: pytest.MonkeyPatch) -> None:
    routes = bucket_routes(REVIEW_BUCKET, recorded("bucket-defaults"), recorded("iam-public"))
    with serving_recorded(routes) as gcs:
        decision = validate(load_review("33"), engine_at(monkeypatch, gcs.url))
    denied, warned = rules_in(decision)
    assert denied == {
        "bucket-public-access-prevention",
        "bucket-uniform-access",
        "bucket-public-iam",
    }
    assert warned == {
        "bucket-soft-delete",
        "bucket-hierarchical-namespace",
        "bucket-location",
        "bucket-service-agent",  # iam-public grants the GKE service agent nothing
    }
    assert "allUsers" in (decision.message or "")
    assert "allAuthenticatedUsers" in (decision.message or "")


def test_mode_warn_and_rule_overrides_apply_to_governance(
    monkeypatch: pytest.MonkeyPatch, fake_gcs: FakeGcs
) -> None:
    ensure_bucket(fake_gcs, REVIEW_BUCKET)
    warn = validate(load_review("33"), engine_at(monkeypatch, fake_gcs.url, enforcement="warn"))
    assert warn.allowed
    assert {"bucket-public-access-prevention", "bucket-uniform-access"} <= rules_in(warn)[1]
    rules = RuleSettings(
        modes={"bucket-uniform-access": "audit"}, disabled=["bucket-public-access-prevention"]
    )
    tuned = validate(load_review("33"), engine_at(monkeypatch, fake_gcs.url, rules=rules))
    assert tuned.allowed
    assert not {"bucket-public-access-prevention", "bucket-uniform-access"} & rules_in(tuned)[1]
    assert "bucket-uniform-access" in {f.rule for f in tuned.audit["findings"]}


def test_disabled_storage_checks_only_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # A closed port: any GCS lookup would show up as a bucket-reachable warning.
    engine = engine_at(monkeypatch, f"http://127.0.0.1:{free_port()}", enabled=False)
    decision = validate(load_review("33"), engine)
    assert decision.allowed and decision.warnings == ()
    assert rules_in(validate(review_33("Not_A_Bucket"), engine)) == ({"bucket-name"}, set())


def test_the_mutating_endpoint_leaves_snapshot_crds_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = engine_at(monkeypatch, f"http://127.0.0.1:{free_port()}")
    for name in ("33", "34"):
        assert admit(request_of(load_review(name)), "mutate", engine) == Decision(allowed=True)


def review_34(**spec: Any) -> dict[str, Any]:
    """Review 34 with ``spec`` fields replaced."""
    review = load_review("34")
    review["request"]["object"]["spec"].update(spec)
    return review


def test_review_34_the_example_policy_is_allowed_with_its_grouping_warning(engine: Engine) -> None:
    decision = validate(load_review("34"), engine)
    assert decision.allowed
    # The example groups by `model` but selects only on `app`.
    assert rules_in(decision) == (set(), {"policy-grouping-labels"})


def test_review_34_denies_an_unknown_storage_config(engine: Engine) -> None:
    decision = validate(review_34(storageConfigName="nope"), engine)
    assert rules_in(decision) == ({"policy-storage-config"}, {"policy-grouping-labels"})
    assert "PodSnapshotPolicy snap/llm-policy" in (decision.message or "")


def test_review_34_under_another_name_overlaps_llm_policy(engine: Engine) -> None:
    review = load_review("34")
    review["request"]["name"] = review["request"]["object"]["metadata"]["name"] = "llm-policy-2"
    _, warned = rules_in(validate(review, engine))
    assert "policy-overlap" in warned


@pytest.mark.parametrize(
    ("value", "warned"),
    [
        pytest.param("audit", False, id="a-mode"),
        pytest.param("audti", True, id="a-typo"),
        pytest.param("Warn", True, id="modes-are-lower-case"),
        pytest.param("", True, id="empty"),
    ],
)
def test_an_enforcement_annotation_that_is_no_mode_is_warned(
    engine: Engine, value: str, warned: bool
) -> None:
    # Admission ignores it (the pods fall back to the namespace's or the global mode): a typo
    # meant to audit would leave them denied without a word.
    review = load_review("34")
    review["request"]["object"]["metadata"]["annotations"]["snapready.io/enforcement"] = value
    decision = validate(review, engine)
    assert decision.allowed
    assert ("policy-enforcement" in rules_in(decision)[1]) is warned
    if warned:
        [line] = [w for w in decision.warnings if "policy-enforcement" in w]
        assert f"{value!r} is not enforce, warn or audit" in line
        assert ("modes are lower case: 'warn'" in line) is (value == "Warn")


def test_an_enforcement_annotation_typo_is_not_warned_when_the_rule_is_disabled() -> None:
    engine = build_engine(make_settings(rules={"disabled": ["policy-enforcement"]}))
    review = load_review("34")
    review["request"]["object"]["metadata"]["annotations"]["snapready.io/enforcement"] = "audti"
    assert "policy-enforcement" not in rules_in(validate(review, engine))[1]


def test_a_policy_cannot_relax_its_own_review(engine: Engine) -> None:
    review = review_34(storageConfigName="nope")
    review["request"]["object"]["metadata"]["annotations"]["snapready.io/enforcement"] = "audit"
    assert not validate(review, engine).allowed


@pytest.mark.parametrize(
    ("labels", "allowed", "warned"),
    [
        pytest.param({}, False, {"policy-grouping-labels"}, id="global-enforce-denies"),
        pytest.param(
            {"snapready.io/enforcement": "warn"},
            True,
            {"policy-storage-config", "policy-grouping-labels"},
            id="namespace-label-warn-turns-the-denial-into-a-warning",
        ),
        pytest.param({"snapready.io/ignore": "true"}, True, set(), id="ignored-namespace"),
    ],
)
def test_namespace_labels_apply_to_policies(
    labels: dict[str, str], allowed: bool, warned: set[str]
) -> None:
    state = ClusterState(
        policies=PolicyIndex(),
        storage_configs={"other": StorageConfig("other", "b")},
        namespace_labels={"snap": labels},
        synced=True,
    )
    engine = Engine(settings=make_settings(), state=lambda: state, governance=Governance(None))
    decision = validate(load_review("34"), engine)
    assert decision.allowed is allowed
    assert rules_in(decision)[1] == warned


def test_governance_over_real_https(
    server_factory: Callable[..., RunningServer], fake_gcs: FakeGcs
) -> None:
    ensure_bucket(fake_gcs, REVIEW_BUCKET)
    env = {
        "STORAGE_EMULATOR_HOST": fake_gcs.url,
        "SNAPREADY_STORAGE__STRICT": "true",
        "SNAPREADY_STORAGE__CLUSTER_LOCATION": "europe-west4",
        "SNAPREADY_SERVER__DRAIN_SECONDS": "0",  # stop at once after the test
    }
    server = server_factory(env=env)
    review = load_review("33")
    with server.client() as client:
        answer = client.post("/validate", json=review).json()["response"]
        policy = client.post("/validate", json=load_review("34")).json()["response"]
    assert answer["uid"] == review["request"]["uid"]
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 403
    # strict: the IAM policy the emulator cannot serve is a denial too.
    for rule in ("bucket-public-access-prevention", "bucket-uniform-access", "bucket-public-iam"):
        assert f"[{rule}]" in answer["status"]["message"]
    assert any(line.startswith("[bucket-location]") for line in answer["warnings"])
    assert policy["allowed"] is True
    assert [line.split("]")[0] for line in policy["warnings"]] == ["[policy-grouping-labels"]


def test_check_covers_policies_and_storage_configs(
    monkeypatch: pytest.MonkeyPatch,
    fake_gcs: FakeGcs,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ensure_bucket(fake_gcs, "snapready-check-bucket")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake_gcs.url)
    storage = review_33("snapready-check-bucket")["request"]["object"]
    policy = review_34(storageConfigName="snapshots-us-central1")["request"]["object"]
    policy["metadata"]["name"] = "web-policy"
    policy["spec"]["selector"] = {"matchLabels": {"app": "web"}}
    del policy["spec"]["retentionConfig"]
    (tmp_path / "storage.yaml").write_text(yaml.safe_dump(storage))
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    files = [str(tmp_path / "storage.yaml"), str(tmp_path / "policy.json")]
    code = main(["check", *files, "--policies", str(EXAMPLES), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    by_kind = {r["kind"]: r for r in report["results"]}
    assert by_kind["PodSnapshotStorageConfig"]["decision"] == "deny"
    assert {f["rule"] for f in by_kind["PodSnapshotStorageConfig"]["findings"]} >= {
        "bucket-public-access-prevention",
        "bucket-uniform-access",
    }
    assert by_kind["PodSnapshotPolicy"]["decision"] == "warn"
    assert {f["rule"] for f in by_kind["PodSnapshotPolicy"]["findings"]} == {
        "policy-retention",
        "policy-grouping-labels",
    }


def test_a_slow_bucket_lookup_does_not_stall_pod_admissions(
    server_factory: Callable[..., RunningServer],
) -> None:
    """Governance runs in a worker thread: pod reviews are answered while GCS is still silent."""
    with serving_recorded(bucket_routes(REVIEW_BUCKET, {}, None), delay=1.5) as gcs:
        env = {"STORAGE_EMULATOR_HOST": gcs.url, "SNAPREADY_STORAGE__TIMEOUT_SECONDS": "3"}
        server = server_factory(env=env)
        finished: list[str] = []

        def storage_review() -> None:
            with server.client() as client:
                client.post("/validate", json=review_33())
            finished.append("storage-config")

        thread = threading.Thread(target=storage_review)
        thread.start()
        time.sleep(0.3)  # let the storage-config review reach its GCS call
        with server.client() as client:
            pod = client.post("/validate", json=load_review("03")).json()["response"]
        finished.append("pod")
        thread.join(10)
    assert pod["allowed"] is True
    assert finished == ["pod", "storage-config"]
