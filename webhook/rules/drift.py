"""``hash-drift`` (validating): the ``<prefix>spec-hash`` annotation no longer matches the pod.

snapready stamps the fingerprint of the pod as it leaves its mutating webhook. A mutating webhook
that runs later (a sidecar injector, a policy engine) may still change hashed fields (containers,
volumes, mounts, securityContext...; docs/gke-facts.md#section-3). The validating webhook sees the
final object: if its fingerprint differs, the annotation misleads anyone comparing pods, and the
later webhook's edits may differ between the checkpoint pod and its restores. Advisory (``warn``).
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.base.keys import SPEC_HASH
from webhook.base.types import Finding
from webhook.pod.context import PodContext
from webhook.pod.memo import recorded_fingerprint
from webhook.snapshots.audit import admitted


class HashDrift:
    """``hash-drift``: warn when a Pod's recorded fingerprint differs from its final spec's.

    Skipped for pod templates (controllers are not stamped), pods without snapready's stamps
    (``snapshots.audit.admitted``: its label and a fingerprint-shaped annotation;
    ``not-stamped`` warns of it; offline, as in ``snapready check``, nothing does), and
    ``rootfs-only`` policies (GKE does not hash the spec for them).
    """

    rule_ids: tuple[str, ...] = ("hash-drift",)

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """At most one warn finding at ``metadata.annotations["<prefix>spec-hash"]``."""
        if pod.kind != "Pod" or pod.rootfs_only:
            return []
        key = pod.settings.annotation(SPEC_HASH)
        recorded = pod.annotations.get(key)
        if not admitted(pod.metadata, pod.settings.prefix):
            return []  # not snapready's stamps: ``not-stamped`` says so
        # The memo usually holds it: this replica stamped the same content at /mutate.
        if recorded_fingerprint({"metadata": pod.metadata, "spec": pod.spec}) == recorded:
            return []
        message = (
            "a mutating webhook that ran after snapready changed hashed fields; set snapready's "
            "reinvocationPolicy: IfNeeded, or find the change with `snapready diff`"
        )
        return [Finding(pod.metadata_field("annotations", key), "hash-drift", message, "warn")]
