"""snapready's own annotation and label names: the part after the prefix (``Settings.prefix``,
default ``snapready.io/``; ``Settings.annotation(name)`` joins them).

One place for every key snapready writes or reads on pods, workloads, PodSnapshotPolicies and
PodSnapshotManualTriggers, so that a reader can see them all and a rename cannot miss one. Who
may write each key is the ownership rule (``mutation.ownership``): on a selected pod, only
``INJECT`` and the ``SNAPSHOT_SOURCE`` label are user inputs; every other key is snapready's
and a copy the pod brought is dropped at admission.
"""

from __future__ import annotations

import re
from typing import Final

# Labels.
SELECTED: Final = "selected"
"""Label ``true`` on every pod snapready stamped at admission (what the caches watch)."""
SNAPSHOT_SOURCE: Final = "snapshot-source"
"""User label ``true``: a pod a manual trigger may checkpoint (``trigger.require_label``)."""
USER_LABELS: Final = (SNAPSHOT_SOURCE,)
"""The ``<prefix>`` pod labels a user may set: every other one is snapready's."""
REFRESH: Final = "refresh"
"""Label ``true`` on the PodSnapshotManualTriggers the leader creates to refresh a group."""

# Annotations snapready writes on a selected pod at admission.
POLICY: Final = "policy"
"""The selecting PodSnapshotPolicies' names, joined by ``,``."""
SPEC_HASH: Final = "spec-hash"
"""snapready's fingerprint of the pod's distilled spec (``pod.distill``), written last."""
FINGERPRINT_SHAPE: Final = re.compile(r"v1:sha256:[0-9a-f]{64}")
"""What snapready's fingerprint in ``<prefix>spec-hash`` looks like (``fullmatch``;
``webhook.pod.distill`` writes ``v1:sha256:<sha256 hex>``, the only version there is; a new one
adds its shape here): a value of another shape was not written by snapready's mutating webhook
(a tenant can set it on its pod)."""
RESTORE_PREDICTION: Final = "restore-prediction"
"""The admission-time prediction: ``hit``, ``miss`` or ``none`` (``pod.restore``)."""
RESTORE_SNAPSHOT: Final = "restore-snapshot"
"""The PodSnapshot a ``hit`` predicts (or the nearest one a ``miss`` compared)."""
RESTORE_REASON: Final = "restore-reason"
"""Why a prediction is ``miss`` or ``none`` (the first differing field or the missing fact)."""

# Written later by the leader.
RESTORE_OUTCOME: Final = "restore-outcome"
"""The outcome the leader decided for a stamped pod (``snapshots.outcomes``), written once."""
RESTORE_SETTLED: Final = "restore-settled"
"""Readiness-gate condition type the leader sets when a gated pod's restore has settled."""
REFRESH_OF: Final = "refresh-of"
"""On a refresh trigger: the stale snapshots it replaces, joined by ``,``."""
REPORT_DIGEST: Final = "report-digest"
"""On a PolicyReport: the digest of what it reports, so an unchanged report is not rewritten."""

# User and admin inputs.
INJECT: Final = "inject"
"""Per-pod opt-out of helper injection (``"false"``)."""
USER_ANNOTATIONS: Final = (INJECT,)
"""The ``<prefix>`` pod annotations a user may set: every other one is snapready's
(``mutation.ownership``, ``kube.scope.owned_keys_cel``)."""
ENFORCEMENT: Final = "enforcement"
"""On a PodSnapshotPolicy: the admin's enforcement mode for the pods it selects."""
IGNORE: Final = "ignore"
"""Namespace label ``true``: snapready judges no pod of that namespace."""
ORIGIN: Final = "origin"
"""The legacy origin annotation on PodSnapshots (before ``SnapshotRecord``), read to convert it."""

# Reserved names in a selected pod's spec.
HELPERS_NAME: Final = "snapready-helpers"
"""The injected helpers container (a native sidecar) and its emptyDir volume
(``mutation.helpers``); ``rules.sandbox`` names it too."""
LEGACY_HELPERS_COMMAND: Final = ("cp", "-R", "/opt/snapready/helpers/.", "/snapready/")
"""The command of the run-to-completion ``HELPERS_NAME`` init container earlier versions
injected (a pod copied from one they admitted still carries it)."""
