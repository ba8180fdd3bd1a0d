"""Every rule id a finding can carry, so that ``rules.disabled`` and ``rules.modes`` can be checked.

A rule id in those settings that no rule raises does nothing: ``rules.modes:
{machine-familly: audit}`` would leave ``machine-family`` enforcing without a word, the same
silent fallback an unknown settings key had (``webhook.base.section``). ``RULE_IDS`` is the
list a settings value is checked against; ``tests/rules/test_documented.py`` compares it with the
ids the rules really raise (``scripts/docsgen/rules.py`` reads them from the source, as the docs'
pages under ``docs/rules/`` are made), so a new rule fails that test until it is named here.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

INIT_EMPTYDIR = "init-emptydir"
"""The rule whose model (``pod.emptydirs``) the restore prediction also applies: disabling it
turns that model off in the prediction too."""

RULE_IDS: frozenset[str] = frozenset(
    {
        # Pods and workload templates (webhook/rules, webhook/admission, webhook/cli/check).
        "checkpoint-window", "cross-workload", "gcsfuse", "gpu-driver", "gpu-machine",
        "gpu-mig", "gpu-multi-l4", "gpu-sharing", "gpu-whole-node", "gvisor-runtime",
        "hash-drift", "helper-collision", "image-digest", "init-emptydir", "machine-family",
        "machine-unpinned",
        "not-stamped", "owned-metadata", "restore-from-policy", "restore-miss",
        "restore-prediction", "rollout-cold-start", "sandbox-compat", "selection-depends-on-pod",
        "shared-fingerprint", "snapshot-ready", "stale-config", "stale-state",
        "too-many-containers", "tpu",
        # PodSnapshotPolicy, PodSnapshotManualTrigger and bucket governance (webhook/governance).
        "manual-trigger", "policy-enforcement", "policy-grouping-labels", "policy-overlap",
        "policy-retention", "policy-retention-format", "policy-selector", "policy-selector-empty",
        "policy-spec", "policy-storage-config", "policy-trigger-type",
        "bucket-hierarchical-namespace", "bucket-location", "bucket-name",
        "bucket-public-access-prevention", "bucket-public-iam", "bucket-reachable",
        "bucket-service-agent", "bucket-soft-delete", "bucket-uniform-access",
    }
)  # fmt: skip


def unknown_rule_ids(ids: Iterable[str]) -> None:
    """Raise ``ValueError`` naming the first of ``ids`` (a list, or a mapping's keys) that is no
    rule id, with the closest known id when one is near (``difflib``, cutoff 0.6, compared in
    lower case: ids are). Returns None when every id is known."""
    for rule_id in ids:
        if rule_id not in RULE_IDS:
            near = difflib.get_close_matches(str(rule_id).lower(), RULE_IDS, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ValueError(
                f"{rule_id!r} is no rule id{hint}; the ids are the pages of docs/rules/"
            )
