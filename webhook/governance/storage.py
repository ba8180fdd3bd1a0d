"""Governance rules for PodSnapshotStorageConfig objects and their GCS bucket (pure: no I/O).

The bucket holds full memory images of pods, so it must not be public (public access prevention
enforced, uniform bucket-level access, no allUsers/allAuthenticatedUsers bindings), should have
soft delete off and hierarchical namespace on (GKE prerequisites per secondary sources, hence
warnings), and should sit in the cluster's region (docs/gke-facts.md#section-8). Bucket facts arrive
as a ``BucketFacts`` value from an injected lookup (``webhook.cluster.gcs`` in the server).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from webhook.base.sections import StorageSettings
from webhook.base.types import Finding, RawObject, Severity

BUCKET_PATH = "spec.snapshotStorageConfig.gcs.bucket"
NAMING_DOC = "https://cloud.google.com/storage/docs/buckets#naming"
_BUCKET_CHARS = re.compile(r"[a-z0-9._-]+", re.ASCII)
_DOTTED_DECIMAL = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}", re.ASCII)
_GOOGLE_LIKE = re.compile(r"g[o0][o0]gle")
_ZONE = re.compile(r"([a-z]+-[a-z]+[0-9]+)-[a-z]")
# Multi-regions and predefined dual-regions (https://cloud.google.com/storage/docs/locations).
# Only used to explain a location mismatch; a mismatch is a warning either way. The EU
# multi-region excludes London (europe-west2) and Zurich (europe-west6), outside the EU.
MULTI_REGIONS = {"US": "us-", "EU": "europe-", "ASIA": "asia-"}
EU_EXCLUDED = frozenset({"europe-west2", "europe-west6"})
DUAL_REGIONS = {
    "NAM4": ("us-central1", "us-east1"),
    "EUR4": ("europe-north1", "europe-west4"),
    "ASIA1": ("asia-northeast1", "asia-northeast2"),
}


@dataclass(frozen=True)
class BucketFacts:
    """What GCS said about one bucket (filled by ``webhook.cluster.gcs``; None means "not
    reported").

    Attributes:
        name: bucket name.
        exists: True/False when GCS answered; None when it could not be asked (see ``error``).
        error: why the bucket could not be inspected (timeout, network, credentials, HTTP 403).
        location: GCS location code as reported, e.g. ``US-CENTRAL1``, ``US``, ``NAM4``.
        data_locations: regions of a configurable dual-region (``customPlacementConfig``).
        public_access_prevention: ``enforced`` or ``inherited``.
        uniform_access: uniform bucket-level access enabled.
        soft_delete_seconds: ``softDeletePolicy.retentionDurationSeconds`` (0 = off).
        hierarchical_namespace: ``hierarchicalNamespace.enabled``.
        public_members: ``"role: member"`` bindings to allUsers/allAuthenticatedUsers; None when
            the IAM policy could not be read (see ``iam_error``).
        iam_error: why the IAM policy could not be read.
        agent_roles: roles the bucket's IAM policy grants to a GKE service agent
            (``service-<project number>@container-engine-robot.iam.gserviceaccount.com``); None
            when the IAM policy could not be read.
    """

    name: str
    exists: bool | None = None
    error: str | None = None
    location: str | None = None
    data_locations: tuple[str, ...] = ()
    public_access_prevention: str | None = None
    uniform_access: bool | None = None
    soft_delete_seconds: int | None = None
    hierarchical_namespace: bool | None = None
    public_members: tuple[str, ...] | None = None
    iam_error: str | None = None
    agent_roles: tuple[str, ...] | None = None


BucketLookup = Callable[[str], BucketFacts]
"""Returns the facts of one bucket within a bounded time; never raises."""


def bucket_name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid GCS bucket name, or None (rules of ``NAMING_DOC``).

    3-63 characters (up to 222 with dots, each dot-separated part at most 63); lowercase letters,
    digits, ``-``, ``_`` and ``.``; starts and ends with a letter or digit; not an IPv4 address
    in dotted-decimal notation; no ``goog`` prefix; no ``google`` or close misspellings.
    """
    if not _BUCKET_CHARS.fullmatch(name):
        return "may contain only lowercase letters, digits, '-', '_' and '.'"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "must start and end with a letter or digit"
    limit = 222 if "." in name else 63
    if not 3 <= len(name) <= limit:
        return f"must be 3-{limit} characters long (got {len(name)})"
    if any(not 1 <= len(part) <= 63 for part in name.split(".")):
        return "each dot-separated part must be 1-63 characters long"
    if _DOTTED_DECIMAL.fullmatch(name):
        return "must not be an IP address in dotted-decimal notation"
    if name.startswith("goog"):
        return "must not start with 'goog'"
    if _GOOGLE_LIKE.search(name):
        return "must not contain 'google' or a close misspelling of it"
    return None


def storage_findings(
    obj: RawObject, settings: StorageSettings, lookup: BucketLookup | None
) -> list[Finding]:
    """Findings for one PodSnapshotStorageConfig; ``lookup`` None skips the GCS checks."""
    spec = obj.get("spec")
    storage = spec.get("snapshotStorageConfig") if isinstance(spec, dict) else None
    gcs = storage.get("gcs") if isinstance(storage, dict) else None
    bucket = gcs.get("bucket") if isinstance(gcs, dict) else None
    if not isinstance(bucket, str) or not bucket:
        return [Finding(BUCKET_PATH, "bucket-name", "required: the name of a GCS bucket")]
    problem = bucket_name_problem(bucket)
    if problem is not None:
        message = f"{bucket!r} {problem} (see {NAMING_DOC})"
        return [Finding(BUCKET_PATH, "bucket-name", message)]
    if lookup is None:
        return []
    return bucket_findings(lookup(bucket), settings)


def bucket_findings(facts: BucketFacts, settings: StorageSettings) -> list[Finding]:
    """Findings from the facts of an existing (or unreachable) bucket."""
    url = f"gs://{facts.name}"
    unverified: Severity = "deny" if settings.strict else "warn"
    if facts.exists is None:
        message = f"cannot inspect {url} (check the webhook's access to GCS): {facts.error}"
        return [Finding(BUCKET_PATH, "bucket-reachable", message, unverified)]
    if not facts.exists:
        message = f"{url} does not exist: create it, or name an existing bucket"
        return [Finding(BUCKET_PATH, "bucket-reachable", message)]
    update = f"gcloud storage buckets update {url}"
    findings = []
    if facts.public_access_prevention != "enforced":
        message = f"public access prevention is not enforced: {update} --public-access-prevention"
        findings.append(Finding(BUCKET_PATH, "bucket-public-access-prevention", message))
    if not facts.uniform_access:
        message = f"uniform bucket-level access is off: {update} --uniform-bucket-level-access"
        findings.append(Finding(BUCKET_PATH, "bucket-uniform-access", message))
    findings += _iam_findings(facts, url, unverified)
    if facts.soft_delete_seconds != 0:
        state = "not reported" if facts.soft_delete_seconds is None else "on"
        message = (
            f"soft delete is {state} (deleted snapshots billed 7 more days): {update} "
            "--clear-soft-delete"
        )
        findings.append(Finding(BUCKET_PATH, "bucket-soft-delete", message, "warn"))
    if not facts.hierarchical_namespace:
        message = (
            "hierarchical namespace is off; GKE expects it on and it is set only at creation:"
            " use a bucket created with --enable-hierarchical-namespace"
        )
        findings.append(Finding(BUCKET_PATH, "bucket-hierarchical-namespace", message, "warn"))
    findings += agent_findings(facts)
    findings += location_findings(facts, settings.cluster_location)
    return findings


OBJECT_ROLES = frozenset(
    {"roles/storage.objectUser", "roles/storage.objectAdmin", "roles/storage.admin"}
)
"""Predefined roles that let GKE delete a snapshot's objects (``storage.objects.delete``)."""


def agent_findings(facts: BucketFacts) -> list[Finding]:
    """``bucket-service-agent`` (warn): the GKE service agent has no object role on the bucket.

    Source: docs/gke-facts.md#section-9 (field reports): without ``roles/storage.objectUser`` for
    ``service-<project number>@container-engine-robot.iam.gserviceaccount.com`` a deleted
    PodSnapshot hangs in ``Deleting`` and its data stays in the bucket. A project-level grant is
    not in the bucket's policy, so the message says so; unread IAM is ``bucket-public-iam``'s.
    """
    if facts.agent_roles is None or OBJECT_ROLES & set(facts.agent_roles):
        return []
    message = (
        "GKE's service agent (service-N@container-engine-robot) has no object role here: deleted"
        " PodSnapshots hang in Deleting; grant it roles/storage.objectUser (if not on the project)"
    )
    return [Finding(BUCKET_PATH, "bucket-service-agent", message, "warn")]


def _iam_findings(facts: BucketFacts, url: str, unverified: Severity) -> list[Finding]:
    if facts.public_members is None:
        message = (
            f"cannot read the IAM policy of {url} (grant the webhook"
            f" storage.buckets.getIamPolicy on it): {facts.iam_error}"
        )
        return [Finding(BUCKET_PATH, "bucket-public-iam", message, unverified)]
    return [
        Finding(
            BUCKET_PATH,
            "bucket-public-iam",
            f"IAM grants {binding}: gcloud storage buckets remove-iam-policy-binding {url}"
            f" --member={binding.rpartition(': ')[2]} --role={binding.partition(': ')[0]}",
        )
        for binding in facts.public_members
    ]


def cluster_region(location: str) -> str:
    """The region of a cluster location: ``us-central1-a`` -> ``us-central1`` (lowercase)."""
    lowered = location.strip().lower()
    zone = _ZONE.fullmatch(lowered)
    return zone.group(1) if zone else lowered


def _wider_location(facts: BucketFacts, region: str) -> tuple[str | None, bool]:
    """(description, contains ``region``) for a dual- or multi-region bucket, else (None, False).

    A configurable dual-region reports the multi-region code (``US``) plus its data locations.
    """
    code = (facts.location or "").upper()
    if facts.data_locations:
        regions = sorted({loc.lower() for loc in facts.data_locations})
        return f"dual-region {code} ({'+'.join(regions)})", region in regions
    if code in DUAL_REGIONS:
        return f"dual-region {code}", region in DUAL_REGIONS[code]
    if code in MULTI_REGIONS:
        outside_eu = code == "EU" and region in EU_EXCLUDED
        return f"multi-region {code}", region.startswith(MULTI_REGIONS[code]) and not outside_eu
    return None, False


def location_findings(facts: BucketFacts, cluster_location: str | None) -> list[Finding]:
    """A warning when the bucket is not in the cluster's region (compared case-insensitively).

    A multi- or dual-region that contains the region is still a warning: restores may read from
    the other region (slower, replication and egress charges).
    """
    if not cluster_location or not facts.location:
        return []
    region = cluster_region(cluster_location)
    if facts.location.lower() == region:
        return []
    wider, contains = _wider_location(facts, region)
    if contains:
        message = (
            f"bucket is in {wider}, which includes {region} but also other regions: restores"
            f" may read across regions; a bucket in {region} is faster and cheaper"
        )
    else:
        message = (
            f"bucket is in {facts.location} but the cluster is in {region}: every checkpoint and"
            f" restore crosses regions (slower, egress charges); use a bucket in {region}"
        )
    return [Finding(BUCKET_PATH, "bucket-location", message, "warn")]
