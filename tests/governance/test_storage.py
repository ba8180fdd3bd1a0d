"""Governance rules for PodSnapshotStorageConfig objects (``webhook.governance.storage``), pure.

Bucket facts are given as values here; how they are read from GCS is ``test_gcs.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.base.sections import StorageSettings
from webhook.governance import (
    BucketFacts,
    bucket_findings,
    bucket_name_problem,
    storage_findings,
)
from webhook.governance.storage import cluster_region, location_findings

HARDENED = BucketFacts(
    "snapshots",
    exists=True,
    location="US-CENTRAL1",
    public_access_prevention="enforced",
    uniform_access=True,
    soft_delete_seconds=0,
    hierarchical_namespace=True,
    public_members=(),
)
IN_US_CENTRAL1 = StorageSettings(cluster_location="us-central1")


def config(bucket: Any) -> dict[str, Any]:
    """A PodSnapshotStorageConfig naming ``bucket``."""
    return {
        "apiVersion": "podsnapshot.gke.io/v1",
        "kind": "PodSnapshotStorageConfig",
        "metadata": {"name": "snapshots"},
        "spec": {"snapshotStorageConfig": {"gcs": {"bucket": bucket, "path": "p"}}},
    }


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("abc", id="accepts-three-characters"),
        pytest.param("a" * 63, id="accepts-sixty-three-characters"),
        pytest.param("my_bucket-01", id="accepts-underscore-and-dash"),
        pytest.param("snapshots.example.com", id="accepts-dotted-names"),
        pytest.param(
            ".".join(["a" * 63] * 3) + "." + "a" * 30, id="accepts-222-characters-with-dots"
        ),
        pytest.param("1.2.3.x", id="accepts-almost-an-ip-address"),
    ],
)
def test_valid_bucket_names(name: str) -> None:
    assert bucket_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        pytest.param("ab", "3-63", id="rejects-two-characters"),
        pytest.param("a" * 64, "3-63", id="rejects-sixty-four-characters-without-dots"),
        pytest.param(
            ".".join(["a" * 63] * 3) + "." + "a" * 31, "3-222", id="rejects-223-with-dots"
        ),
        pytest.param("a" * 64 + ".com", "each dot-separated part", id="rejects-a-long-part"),
        pytest.param("a..b", "each dot-separated part", id="rejects-an-empty-part"),
        pytest.param("My-Bucket", "lowercase", id="rejects-uppercase"),
        pytest.param("my bucket", "lowercase", id="rejects-a-space"),
        pytest.param("gs://bucket", "lowercase", id="rejects-a-gs-url"),
        pytest.param("-bucket", "start and end", id="rejects-a-leading-dash"),
        pytest.param("bucket_", "start and end", id="rejects-a-trailing-underscore"),
        pytest.param("192.168.5.4", "IP address", id="rejects-an-ip-address"),
        pytest.param("goog-snapshots", "goog", id="rejects-the-goog-prefix"),
        pytest.param("my-google-bucket", "google", id="rejects-google-inside"),
        pytest.param("my-g00gle-bucket", "google", id="rejects-a-misspelled-google"),
    ],
)
def test_invalid_bucket_names(name: str, fragment: str) -> None:
    problem = bucket_name_problem(name)
    assert problem is not None and fragment in problem


def never_called(bucket: str) -> BucketFacts:
    """A lookup that fails the test if used."""
    raise AssertionError(f"looked up {bucket!r}")


@pytest.mark.parametrize(
    "bucket",
    [
        pytest.param(None, id="denies-a-missing-bucket"),
        pytest.param("", id="denies-an-empty-bucket"),
        pytest.param(42, id="denies-a-non-string-bucket"),
        pytest.param("Bad_Bucket", id="denies-an-invalid-name-without-asking-gcs"),
    ],
)
def test_bucket_name_findings(bucket: Any) -> None:
    found = storage_findings(config(bucket), StorageSettings(), never_called)
    assert [(f.rule, f.severity, f.path) for f in found] == [
        ("bucket-name", "deny", "spec.snapshotStorageConfig.gcs.bucket")
    ]


def test_a_valid_name_without_lookup_skips_gcs() -> None:
    assert storage_findings(config("snapshots"), StorageSettings(), None) == []


def test_a_valid_name_is_looked_up() -> None:
    found = storage_findings(config("snapshots"), IN_US_CENTRAL1, lambda name: HARDENED)
    assert found == []


def with_facts(**changes: Any) -> BucketFacts:
    """HARDENED with ``changes``."""
    return BucketFacts(**{**HARDENED.__dict__, **changes})


@pytest.mark.parametrize(
    ("facts", "strict", "expected"),
    [
        pytest.param(HARDENED, False, set(), id="accepts-a-hardened-bucket-in-the-region"),
        pytest.param(
            BucketFacts("snapshots", error="timeout"),
            False,
            {("bucket-reachable", "warn")},
            id="warns-when-gcs-cannot-be-reached",
        ),
        pytest.param(
            BucketFacts("snapshots", error="timeout"),
            True,
            {("bucket-reachable", "deny")},
            id="denies-when-gcs-cannot-be-reached-and-strict",
        ),
        pytest.param(
            BucketFacts("snapshots", exists=False),
            False,
            {("bucket-reachable", "deny")},
            id="denies-a-bucket-that-does-not-exist",
        ),
        pytest.param(
            with_facts(public_access_prevention="inherited"),
            False,
            {("bucket-public-access-prevention", "deny")},
            id="denies-inherited-public-access-prevention",
        ),
        pytest.param(
            with_facts(uniform_access=False),
            False,
            {("bucket-uniform-access", "deny")},
            id="denies-fine-grained-access",
        ),
        pytest.param(
            with_facts(public_members=("roles/storage.objectViewer: allUsers",)),
            False,
            {("bucket-public-iam", "deny")},
            id="denies-an-all-users-binding",
        ),
        pytest.param(
            with_facts(public_members=None, iam_error="HTTP 403: no"),
            False,
            {("bucket-public-iam", "warn")},
            id="warns-when-the-iam-policy-cannot-be-read",
        ),
        pytest.param(
            with_facts(public_members=None, iam_error="HTTP 403: no"),
            True,
            {("bucket-public-iam", "deny")},
            id="denies-when-the-iam-policy-cannot-be-read-and-strict",
        ),
        pytest.param(
            with_facts(soft_delete_seconds=604800),
            False,
            {("bucket-soft-delete", "warn")},
            id="warns-on-soft-delete",
        ),
        pytest.param(
            with_facts(soft_delete_seconds=None),
            False,
            {("bucket-soft-delete", "warn")},
            id="warns-when-soft-delete-is-not-reported",
        ),
        pytest.param(
            with_facts(hierarchical_namespace=None),
            False,
            {("bucket-hierarchical-namespace", "warn")},
            id="warns-without-hierarchical-namespace",
        ),
        pytest.param(
            with_facts(location="EUROPE-WEST4"),
            False,
            {("bucket-location", "warn")},
            id="warns-on-a-bucket-in-another-region",
        ),
    ],
)
def test_bucket_rules(facts: BucketFacts, strict: bool, expected: set[Any]) -> None:
    settings = StorageSettings(cluster_location="us-central1", strict=strict)
    assert {(f.rule, f.severity) for f in bucket_findings(facts, settings)} == expected


def test_each_public_binding_is_its_own_finding_with_the_command_to_remove_it() -> None:
    facts = with_facts(
        public_members=(
            "roles/storage.legacyBucketReader: allAuthenticatedUsers",
            "roles/storage.objectViewer: allUsers",
        )
    )
    messages = [f.message for f in bucket_findings(facts, IN_US_CENTRAL1)]
    assert len(messages) == 2
    assert "--member=allUsers --role=roles/storage.objectViewer" in messages[1]
    assert "--member=allAuthenticatedUsers --role=roles/storage.legacyBucketReader" in messages[0]


@pytest.mark.parametrize(
    ("cluster", "location", "data_locations", "fragment"),
    [
        pytest.param("us-central1", "US-CENTRAL1", (), None, id="same-region-any-case"),
        pytest.param("US-CENTRAL1", "us-central1", (), None, id="same-region-upper-setting"),
        pytest.param("us-central1-a", "US-CENTRAL1", (), None, id="zonal-cluster-in-the-region"),
        pytest.param("us-central1", "EUROPE-WEST4", (), "crosses regions", id="other-region"),
        pytest.param("us-central1", "US", (), "multi-region US, which includes", id="us-multi"),
        pytest.param("europe-west4", "EU", (), "multi-region EU, which includes", id="eu-multi"),
        pytest.param("europe-west2", "EU", (), "crosses regions", id="london-is-not-in-eu"),
        pytest.param("asia-east1", "US", (), "crosses regions", id="multi-region-elsewhere"),
        pytest.param("us-east1", "NAM4", (), "dual-region NAM4, which includes", id="nam4"),
        pytest.param(
            "us-east1",
            "US",
            ("US-CENTRAL1", "US-EAST1"),
            "dual-region US (us-central1+us-east1), which includes",
            id="configurable-dual-region-in-us",
        ),
        pytest.param(
            "us-west1",
            "US",
            ("US-CENTRAL1", "US-EAST1"),
            "crosses regions",
            id="configurable-dual-region-elsewhere-in-us",
        ),
        pytest.param("us-west1", "NAM4", (), "crosses regions", id="nam4-elsewhere"),
    ],
)
def test_location_rule(
    cluster: str, location: str, data_locations: tuple[str, ...], fragment: str | None
) -> None:
    facts = with_facts(location=location, data_locations=data_locations)
    found = location_findings(facts, cluster)
    if fragment is None:
        assert found == []
    else:
        assert [f.severity for f in found] == ["warn"]
        assert fragment in found[0].message


def test_no_cluster_location_means_no_location_check() -> None:
    assert location_findings(with_facts(location="EU"), None) == []


def test_cluster_region_of_a_zone() -> None:
    assert cluster_region("europe-west4-b") == "europe-west4"
    assert cluster_region("us-central1") == "us-central1"
