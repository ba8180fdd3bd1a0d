"""Rules against cluster facts, GKE versions, settings, modes and rootfs-only policies.

Cluster facts (node pools, ComputeClasses, the cluster version) are built as ``ClusterState``
values directly, as the cluster source would deliver them; with the file source they are empty.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tests.conftest import make_settings
from tests.rules.test_table import (
    GPU,
    STRICT_RULES,
    cpu_pod,
    judge,
    lines,
    outcomes,
    ready_pod,
    review_pod,
)
from webhook.admission.engine import Engine
from webhook.base.sections import RuleSettings
from webhook.kube.matching import Policy, PolicyIndex
from webhook.rules.gpu_whole_node import parse_gke_version
from webhook.snapshots.state import (
    ClusterState,
    ComputeClassFacts,
    NodePoolFacts,
    parse_policy,
)

NODE_POOL = "cloud.google.com/gke-nodepool"
COMPUTE_CLASS = "cloud.google.com/compute-class"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"

Pod = dict[str, Any]


def policy(name: str = "llm-policy", scope: str = "whole-pod", mode: str | None = None) -> Policy:
    """A PodSnapshotPolicy selecting ``app=llm`` in ``snap``."""
    annotations = {"snapready.io/enforcement": mode} if mode else {}
    return parse_policy(
        {
            "metadata": {"name": name, "namespace": "snap", "annotations": annotations},
            "spec": {
                "selector": {"matchLabels": {"app": "llm"}},
                "storageConfigName": "snaps",
                "snapshotScope": scope,
            },
        },
        prefix="snapready.io/",
    )


def engine_with(
    *, policies: tuple[Policy, ...] = (), settings: dict[str, Any] | None = None, **state: Any
) -> Engine:
    """An engine over a hand-built ``ClusterState`` (``llm-policy`` unless ``policies`` given)."""
    cluster = ClusterState(
        policies=PolicyIndex.build(policies or (policy(),)), synced=True, **state
    )
    version = state.get("gke_version")  # the cluster's own: the rows' preview default yields
    merged = dict(settings or {})
    rules = merged.get("rules", {})
    if isinstance(rules, dict):
        strict = {k: v for k, v in STRICT_RULES.items() if k != "gke_version" or not version}
        merged["rules"] = {**strict, **rules}
    return Engine(settings=make_settings(**merged), state=lambda: cluster)


def pinned(pod: Pod, labels: dict[str, str]) -> Pod:
    """``pod`` with its nodeSelector replaced by ``labels``."""
    return with_spec(pod, nodeSelector=labels)


def with_spec(pod: Pod, **fields: Any) -> Pod:
    """``pod`` with top-level PodSpec ``fields`` replaced."""
    pod["spec"].update(fields)
    return pod


def gpu_container(gpus: str) -> dict[str, Any]:
    """A digest-pinned container with ``gpus`` GPU limit."""
    return {"name": "a", "image": "x@sha256:" + "a" * 64, "resources": {"limits": {GPU: gpus}}}


L4_POOL = NodePoolFacts(
    name="l4-sandbox-pool",
    node_count=1,
    instance_types=frozenset({"g2-standard-48"}),
    machine_families=frozenset({"g2"}),
    accelerators=frozenset({"nvidia-l4"}),
    accelerator_counts=frozenset({"4"}),
    architectures=frozenset({"amd64"}),
)
MIG_POOL = NodePoolFacts(
    name="a100-mig-pool",
    node_count=1,
    instance_types=frozenset({"a2-highgpu-1g"}),
    machine_families=frozenset({"a2"}),
    accelerators=frozenset({"nvidia-tesla-a100"}),
    accelerator_counts=frozenset({"1"}),
    partition_sizes=frozenset({"1g.5gb"}),
)
E2_POOL = NodePoolFacts(
    name="e2-pool",
    node_count=3,
    instance_types=frozenset({"e2-standard-8"}),
    machine_families=frozenset({"e2"}),
)
SHARED_POOL = NodePoolFacts(
    name="shared-l4",
    node_count=2,
    instance_types=frozenset({"g2-standard-8"}),
    machine_families=frozenset({"g2"}),
    accelerators=frozenset({"nvidia-l4"}),
    accelerator_counts=frozenset({"1"}),
    sharing_strategies=frozenset({"time-sharing"}),
)
EMPTY_POOL = NodePoolFacts(name="autoscaled", node_count=0)
POOLS = {p.name: p for p in (L4_POOL, MIG_POOL, E2_POOL, SHARED_POOL, EMPTY_POOL)}
KNOWN = True  # every priority names its family
CLASSES = {
    "mig-class": ComputeClassFacts(
        "mig-class", frozenset({"a2"}), enables_mig=True, families_known=KNOWN
    ),
    "two-families": ComputeClassFacts(
        "two-families", frozenset({"n2", "c3"}), families_known=KNOWN
    ),
    "cheap": ComputeClassFacts("cheap", frozenset({"e2"}), families_known=KNOWN),
    "shared-gpus": ComputeClassFacts(
        "shared-gpus", frozenset({"g2"}), enables_gpu_sharing=True, families_known=KNOWN
    ),
    "n2-only": ComputeClassFacts("n2-only", frozenset({"n2"}), families_known=KNOWN),
    # a nodepools priority beside the e2 one: it may make any family, so not denied as e2
    "cheap-or-pool": ComputeClassFacts("cheap-or-pool", frozenset({"e2"})),
}


@pytest.mark.parametrize(
    ("pod", "state", "deny", "warn", "needle"),
    [
        pytest.param(
            pinned(cpu_pod(), {NODE_POOL: "l4-sandbox-pool"}),
            {},
            set(),
            {"machine-unpinned"},
            'node pool "l4-sandbox-pool" has no node facts here',
            id="warns-pool-pin-without-node-facts-offline",
        ),
        pytest.param(
            pinned(cpu_pod(), {NODE_POOL: "autoscaled"}),
            {"node_pools": POOLS},
            set(),
            {"machine-unpinned"},
            'node pool "autoscaled" has no nodes yet',
            id="warns-pool-with-zero-nodes-as-unknown",
        ),
        pytest.param(
            pinned(ready_pod(), {NODE_POOL: "a100-mig-pool"}),
            {"node_pools": POOLS},
            {"gpu-mig"},
            set(),
            'in node pool "a100-mig-pool"',
            id="denies-gpu-pod-on-mig-node-pool",
        ),
        pytest.param(
            pinned(cpu_pod(), {NODE_POOL: "e2-pool"}),
            {"node_pools": POOLS},
            {"machine-family"},
            set(),
            'family e2 in node pool "e2-pool"',
            id="denies-pod-on-e2-node-pool",
        ),
        pytest.param(
            pinned(ready_pod(), {NODE_POOL: "l4-sandbox-pool"}),
            {"node_pools": POOLS},
            {"gpu-whole-node"},
            set(),
            "g2-standard-48 has 4 GPUs",
            id="denies-one-gpu-pod-on-four-gpu-pool-on-a-preview-version",
        ),
        pytest.param(
            pinned(ready_pod(), {NODE_POOL: "l4-sandbox-pool"}),
            {"node_pools": POOLS, "gke_version": "v1.35.3-gke.1234000"},
            set(),
            set(),
            None,
            id="allows-gpu-subset-on-new-cluster-version-from-api",
        ),
        pytest.param(
            pinned(ready_pod(), {NODE_POOL: "shared-l4"}),
            {"node_pools": POOLS},
            set(),
            {"gpu-sharing"},
            "GPU sharing (time-sharing)",
            id="warns-gpu-pod-on-time-sharing-pool",
        ),
        pytest.param(
            pinned(cpu_pod(), {COMPUTE_CLASS: "n2-only"}),
            {},
            set(),
            {"machine-unpinned"},
            "ComputeClasses are not known here",
            id="warns-compute-class-pin-when-classes-are-not-served",
        ),
        pytest.param(
            pinned(cpu_pod(), {COMPUTE_CLASS: "n2-only"}),
            {"compute_classes": CLASSES},
            set(),
            set(),
            None,
            id="allows-compute-class-with-one-family",
        ),
        pytest.param(
            pinned(cpu_pod(), {COMPUTE_CLASS: "missing"}),
            {"compute_classes": CLASSES},
            set(),
            {"machine-unpinned"},
            'ComputeClass "missing": not found',
            id="warns-unknown-compute-class",
        ),
        pytest.param(
            pinned(ready_pod(), {COMPUTE_CLASS: "mig-class"}),
            {"compute_classes": CLASSES},
            {"gpu-mig"},
            set(),
            'in ComputeClass "mig-class"',
            id="denies-gpu-pod-on-compute-class-with-mig",
        ),
        pytest.param(
            pinned(cpu_pod(), {COMPUTE_CLASS: "two-families"}),
            {"compute_classes": CLASSES},
            set(),
            {"machine-unpinned"},
            "may run on families c3, n2",
            id="warns-compute-class-spanning-two-families",
        ),
        pytest.param(
            pinned(cpu_pod(), {COMPUTE_CLASS: "cheap"}),
            {"compute_classes": CLASSES},
            {"machine-family"},
            set(),
            'in ComputeClass "cheap"',
            id="denies-compute-class-on-e2",
        ),
        pytest.param(
            # e2 may still be the priority GKE provisions (denied), and the class does not say
            # all it makes: the machine is not pinned
            pinned(cpu_pod(), {COMPUTE_CLASS: "cheap-or-pool"}),
            {"compute_classes": CLASSES},
            {"machine-family"},
            {"machine-unpinned"},
            'in ComputeClass "cheap-or-pool"',
            id="a-compute-class-that-may-make-other-families-is-not-a-pin",
        ),
        pytest.param(
            pinned(ready_pod(), {COMPUTE_CLASS: "shared-gpus", INSTANCE_TYPE: "g2-standard-8"}),
            {"compute_classes": CLASSES},
            set(),
            {"gpu-sharing"},
            'in ComputeClass "shared-gpus"',
            id="warns-compute-class-with-gpu-sharing",
        ),
    ],
)
def test_node_pool_and_compute_class_facts(
    pod: Pod, state: dict[str, Any], deny: set[str], warn: set[str], needle: str | None
) -> None:
    decision = judge(pod, engine_with(**state))
    assert outcomes(decision) == {"deny": deny, "warn": warn}
    if needle is not None:
        assert any(needle in message for _, _, message in lines(decision)), lines(decision)


def test_pool_finding_points_at_the_pool_selector() -> None:
    pod = pinned(ready_pod(), {NODE_POOL: "a100-mig-pool"})
    [(rule, path, _)] = lines(judge(pod, engine_with(node_pools=POOLS)))
    assert (rule, path) == ("gpu-mig", 'spec.nodeSelector["cloud.google.com/gke-nodepool"]')


def test_e2_pool_is_reported_once_not_per_instance_type() -> None:
    pod = pinned(cpu_pod(), {NODE_POOL: "e2-pool"})
    assert [rule for rule, _, _ in lines(judge(pod, engine_with(node_pools=POOLS)))] == [
        "machine-family"
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1.35.0-gke.1738000", (1, 35, 0, 1738000), id="gke-version"),
        pytest.param("v1.35.3-gke.1234000", (1, 35, 3, 1234000), id="git-version-with-v"),
        pytest.param("1.36.1", (1, 36, 1, 0), id="without-gke-build"),
        pytest.param("latest", None, id="not-a-version"),
        pytest.param(None, None, id="unknown"),
    ],
)
def test_parse_gke_version(text: str | None, expected: tuple[int, ...] | None) -> None:
    assert parse_gke_version(text) == expected


@pytest.mark.parametrize(
    ("settings_version", "cluster_version", "denied"),
    [
        pytest.param(None, None, False, id="allows-when-version-unknown-as-on-every-ga-version"),
        pytest.param("1.35.0-gke.1737999", None, True, id="denies-one-build-before-the-fix"),
        pytest.param("1.34.9-gke.9999999", None, True, id="denies-older-minor-with-larger-build"),
        pytest.param("1.35.0-gke.1738000", None, False, id="allows-exactly-the-fixed-version"),
        pytest.param("1.35.1-gke.1", None, False, id="allows-later-patch-with-smaller-build"),
        pytest.param(None, "v1.36.0-gke.100", False, id="allows-when-cluster-reports-new-version"),
        pytest.param("1.34.0-gke.1", "v1.36.0-gke.100", True, id="setting-overrides-cluster"),
    ],
)
def test_gpu_whole_node_is_version_gated(
    settings_version: str | None, cluster_version: str | None, denied: bool
) -> None:
    pod = pinned(ready_pod(), {INSTANCE_TYPE: "g2-standard-48"})
    engine = engine_with(
        settings={"rules": RuleSettings(gke_version=settings_version)},
        gke_version=cluster_version,
    )
    decision = judge(pod, engine)
    assert ("gpu-whole-node" in outcomes(decision)["deny"]) is denied
    # A CLI user is told the flag too, where the version came from the settings.
    hint = any("--gke-version" in m for _, _, m in lines(decision))
    assert hint is (denied and settings_version is not None)


def test_four_gpu_pod_on_four_gpu_node_passes_any_version() -> None:
    assert judge(review_pod("03")).allowed


def test_invalid_gke_version_setting_is_rejected_at_start() -> None:
    with pytest.raises(ValidationError, match="not a GKE version"):
        RuleSettings(gke_version="one-point-thirty-five")


PRIVILEGED = {"name": "a", "image": "x@sha256:" + "a" * 64, "securityContext": {"privileged": True}}


@pytest.mark.parametrize(
    ("rules", "change", "deny", "warn"),
    [
        pytest.param(
            {"sandbox_compat": {"hostNetwork": "deny"}},
            {"hostNetwork": True},
            {"sandbox-compat"},
            set(),
            id="host-network-can-be-made-a-denial",
        ),
        pytest.param(
            {"sandbox_compat": {"hostNetwork": "deny"}},
            {"containers": [PRIVILEGED]},
            {"sandbox-compat"},
            set(),
            id="overriding-one-feature-keeps-the-other-defaults",
        ),
        pytest.param(
            {"sandbox_compat": {"privileged": "off"}},
            {"containers": [PRIVILEGED]},
            set(),
            set(),
            id="privileged-check-can-be-turned-off",
        ),
        pytest.param(
            {"disabled": ["image-digest"]},
            {"containers": [{"name": "a", "image": "nginx:1.27"}]},
            set(),
            set(),
            id="disabled-rule-reports-nothing",
        ),
        pytest.param(
            {"modes": {"gvisor-runtime": "warn"}},
            {"runtimeClassName": "runc"},
            set(),
            {"gvisor-runtime"},
            id="per-rule-mode-turns-a-denial-into-a-warning",
        ),
        pytest.param(
            {"modes": {"image-digest": "audit"}},
            {"containers": [{"name": "a", "image": "nginx:1.27"}]},
            set(),
            set(),
            id="audited-advisory-rule-is-silent",
        ),
        pytest.param(
            {"runtime_class_names": ["gvisor", "gvisor-debug"]},
            {"runtimeClassName": "gvisor-debug"},
            set(),
            set(),
            id="extra-runtime-class-name-is-accepted",
        ),
    ],
)
def test_rule_settings(
    rules: dict[str, Any], change: dict[str, Any], deny: set[str], warn: set[str]
) -> None:
    pod = cpu_pod()
    pod["spec"].update(change)
    decision = judge(pod, engine_with(settings={"rules": RuleSettings(**rules)}))
    assert outcomes(decision) == {"deny": deny, "warn": warn}


def test_gpu_sharing_can_be_made_a_denial() -> None:
    pod = pinned(ready_pod(), {NODE_POOL: "shared-l4"})
    rules = RuleSettings(gpu_sharing_severity="deny")
    decision = judge(pod, engine_with(node_pools=POOLS, settings={"rules": rules}))
    assert outcomes(decision)["deny"] == {"gpu-sharing"}


@pytest.mark.parametrize(
    ("mode", "global_mode", "allowed", "warned"),
    [
        pytest.param(None, "enforce", False, set(), id="enforce-denies"),
        pytest.param(
            "warn", "enforce", True, {"gpu-mig", "image-digest"}, id="policy-warn-mode-warns"
        ),
        pytest.param("audit", "enforce", True, set(), id="policy-audit-mode-is-silent"),
        pytest.param(None, "audit", True, set(), id="global-audit-mode-is-silent"),
        pytest.param("enforce", "warn", False, set(), id="policy-annotation-beats-global-mode"),
    ],
)
def test_enforcement_modes(
    mode: str | None, global_mode: str, allowed: bool, warned: set[str]
) -> None:
    engine = engine_with(policies=(policy(mode=mode),), settings={"enforcement": global_mode})
    decision = judge(review_pod("04"), engine)
    assert decision.allowed is allowed
    if allowed:
        assert outcomes(decision)["warn"] == warned
        assert {f.rule for f in decision.audit["findings"]} == {"gpu-mig", "image-digest"}


@pytest.mark.parametrize(
    ("pod", "deny", "warn"),
    [
        pytest.param(cpu_pod("e2"), set(), set(), id="rootfs-only-allows-e2"),
        pytest.param(review_pod("04"), set(), {"image-digest"}, id="rootfs-only-allows-mig"),
        pytest.param(pinned(cpu_pod(), {}), set(), set(), id="rootfs-only-does-not-warn-unpinned"),
        pytest.param(
            pinned(ready_pod(), {INSTANCE_TYPE: "g2-standard-48"}),
            set(),
            set(),
            id="rootfs-only-allows-gpu-subset-of-node",
        ),
        pytest.param(
            with_spec(pinned(ready_pod(), {}), containers=[gpu_container("2")]),
            set(),
            set(),
            id="rootfs-only-allows-unpinned-multi-gpu",
        ),
        pytest.param(review_pod("03"), set(), set(), id="rootfs-only-skips-stale-state"),
        pytest.param(
            with_spec(cpu_pod(), runtimeClassName="runc"),
            {"gvisor-runtime"},
            set(),
            id="rootfs-only-still-needs-gvisor",
        ),
        pytest.param(
            review_pod("05"), {"gcsfuse"}, {"image-digest"}, id="rootfs-only-still-denies-gcsfuse"
        ),
        pytest.param(
            with_spec(cpu_pod(), volumes=[{"name": "h", "hostPath": {"path": "/"}}]),
            {"sandbox-compat"},
            set(),
            id="rootfs-only-still-denies-hostpath",
        ),
    ],
)
def test_rootfs_only_relaxations(pod: Pod, deny: set[str], warn: set[str]) -> None:
    engine = engine_with(policies=(policy(scope="rootfs-only"),))
    assert outcomes(judge(pod, engine)) == {"deny": deny, "warn": warn}


def test_rootfs_only_needs_every_selecting_policy_to_be_rootfs_only() -> None:
    engine = engine_with(policies=(policy("a", scope="rootfs-only"), policy("b")))
    result = outcomes(judge(cpu_pod("e2"), engine))
    assert result == {"deny": {"machine-family"}, "warn": {"policy-overlap"}}


@pytest.mark.parametrize(
    ("labels", "state", "fix"),
    [
        pytest.param(
            {NODE_POOL: "a100-mig-pool"},
            {"node_pools": POOLS},
            "pin a node pool without MIG partitions and request whole GPUs",
            id="mig-pool-says-pin-another-pool",
        ),
        pytest.param(
            {COMPUTE_CLASS: "mig-class"},
            {"compute_classes": CLASSES},
            "pin a ComputeClass without MIG and request whole GPUs",
            id="mig-compute-class-says-pin-another-class",
        ),
    ],
)
def test_mig_from_cluster_facts_says_what_to_change(
    labels: dict[str, str], state: dict[str, Any], fix: str
) -> None:
    decision = judge(pinned(ready_pod(), labels), engine_with(**state))
    [message] = [message for rule, _, message in lines(decision) if rule == "gpu-mig"]
    assert message.endswith(fix)


def test_many_long_pool_names_are_clipped_in_messages() -> None:
    pools = {
        f"{i}{'p' * 60}": NodePoolFacts(
            name=f"{i}{'p' * 60}",
            node_count=1,
            machine_families=frozenset({"e2"}),
            instance_types=frozenset({"e2-standard-8"}),
        )
        for i in range(6)
    }
    pod = with_spec(
        cpu_pod(),
        nodeSelector={},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": NODE_POOL, "operator": "In", "values": list(pools)}
                            ]
                        }
                    ]
                }
            }
        },
    )
    found = lines(judge(pod, engine_with(node_pools=pools)))
    assert [rule for rule, _, _ in found] == ["machine-family"]
    for _, _, message in found:
        assert len(message) <= 200, message
        assert "p" * 21 not in message
