"""The mutating webhook's denials and warnings are findings that ``rules.disabled`` and
``rules.modes`` govern (issue 34, "Decisions in one place").

Each row admits one selected pod on ``/mutate`` through ``admit``, over the example policies and,
for the restore rules, a cluster state that knows one Ready snapshot ``snap-1`` of
``llm-policy`` (its origin record: the pod's own fingerprint for a ``hit``, another for a
``miss``; taken from ``Deployment decode``; it read Secret ``hf-token``, since deleted). The pod
belongs to ``Deployment prefill``. The texts are pinned byte for byte as users saw them before
these were findings (the warning and denial lines of ``mutation`` before issue 34).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.mutation.test_mutation import apply, container, engine_for, make_pod, make_review, run
from webhook.admission.audit import judge
from webhook.admission.engine import Engine
from webhook.base.types import RawObject
from webhook.kube.responses import Decision
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.views import ConfigRef, OriginRecord, SnapshotView, WorkloadRef

MISS = "snapready: will cold-start (snap-1): the spec fingerprint differs"
MISS_DENIAL = (
    MISS + ". Set restore.on_miss=warn to admit pods predicted to miss, or match the snapshot "
    "(`snapready explain`)."
)
CROSS = (
    "[cross-workload] will restore the memory of Deployment decode (snapshot snap-1), not of "
    "Deployment prefill; group the policy by a label that differs per workload "
    "(snapshotGroupingRules)"
)
CROSS_DENIAL = f"snapready: {CROSS}. Set restore.cross_workload=warn to admit it."
STALE = (
    "[stale-config] restores with the value of Secret hf-token, deleted since (snapshot snap-1); "
    "take a new snapshot to pick up the current configuration"
)
COLLISION = (
    "snapready: cannot inject the rehydration helpers, these names are reserved: "
    "spec.volumes[0]: volume name 'snapready-helpers'. Rename them (snapready adds its own "
    "'snapready-helpers' volume and init container and mounts /snapready), or annotate the pod "
    'snapready.io/inject: "false".'
)
COLLISION_WARNING = COLLISION[:253] + "..."
"""Warnings are cut at 256 characters (the API server's limit)."""
TOO_MANY = (
    "snapready: pod has more than 2 containers; it was not mutated (no helpers, no spec-hash "
    "annotation, no selected label: its restore outcome is not tracked). Raise "
    "injection.max_containers if this is intended."
)


def prefill_pod(containers: int = 1, *, collide: bool = False) -> RawObject:
    """A pod of ``Deployment prefill`` (through its ReplicaSet) that ``llm-policy`` selects."""
    spec: RawObject = {"containers": [container(f"c{i}") for i in range(containers)]}
    if collide:
        spec["volumes"] = [{"name": "snapready-helpers", "hostPath": {"path": "/x"}}]
    pod = make_pod(spec)
    pod["metadata"]["labels"]["pod-template-hash"] = "7c9d5"
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "prefill-7c9d5",
            "uid": "0b7c0d5e-0000-4000-8000-000000000001",
            "controller": True,
        }
    ]
    return pod


def stamped_hash() -> str:
    """The fingerprint ``/mutate`` stamps on ``prefill_pod()`` (file mode)."""
    pod = prefill_pod()
    annotations = apply(pod, run(make_review(pod), engine_for()))["metadata"]["annotations"]
    value: str = annotations["snapready.io/spec-hash"]
    return value


HASH = stamped_hash()


def cluster_engine(*, hit: bool, workload: str = "decode", **overrides: Any) -> Engine:
    """``engine_for(**overrides)`` whose state knows the Ready snapshot ``snap-1``."""
    spec_hash = HASH if hit else "v1:sha256:" + "b" * 64
    return with_snapshot(engine_for(**overrides), spec_hash, workload)


def with_snapshot(
    base: Engine, spec_hash: str, workload: str = "decode", blocker: str | None = None
) -> Engine:
    """``base`` whose state knows the Ready snapshot ``snap-1`` of ``llm-policy`` in ``snap``,
    taken from a pod of fingerprint ``spec_hash`` (of ``Deployment <workload>``, which read
    Secret ``hf-token``, since deleted; gVisor cannot restore from it for ``blocker``)."""
    origin = OriginRecord(
        "origin",
        spec_hash,
        workload=WorkloadRef("Deployment", workload),
        config=(ConfigRef("Secret", "hf-token", "1"),),
        blocker=blocker,
    )
    view = SnapshotView(
        "snap", "snap-1", "llm-policy", "origin", True, "Ready", "2026-12-01T10:00:00Z", None,
        origin,
    )  # fmt: skip
    state = dataclasses.replace(
        base.state(),
        snapshots=SnapshotIndex.build([view]),
        snapshots_known=True,
        configs={"snap": {}},  # watched, and hf-token is gone: stale-config
    )
    return Engine(settings=base.settings, state=lambda: state, governance=base.governance)


@dataclass(frozen=True)
class Row:
    """One pod, one engine, what the API server would show."""

    hit: bool | None = None
    """True/False: the snapshot is a hit/miss for the pod; None: file mode (no snapshots)."""
    workload: str = "decode"
    settings: dict[str, Any] = field(default_factory=dict)
    containers: int = 1
    collide: bool = False
    denial: str | None = None
    warnings: tuple[str, ...] = ()
    rules: tuple[str, ...] | None = None
    """The rule ids recorded in ``audit["findings"]`` (disabled ones are not); None: unchecked."""

    def decide(self) -> Decision:
        """Admit the row's pod on ``/mutate``."""
        if self.hit is None:
            engine = engine_for(**self.settings)
        else:
            engine = cluster_engine(hit=self.hit, workload=self.workload, **self.settings)
        pod = prefill_pod(self.containers, collide=self.collide)
        return run(make_review(pod), engine)


def on_miss(value: str, **rules: Any) -> dict[str, Any]:
    return {"restore": {"on_miss": value}, "rules": rules}


def cross(value: str, **rules: Any) -> dict[str, Any]:
    return {"restore": {"cross_workload": value}, "rules": rules}


ROWS = [
    pytest.param(Row(hit=False, warnings=(MISS,), rules=("restore-miss",)), id="miss-warns"),
    pytest.param(
        Row(hit=False, settings=on_miss("deny"), denial=MISS_DENIAL, rules=("restore-miss",)),
        id="miss-denied-under-on-miss-deny",
    ),
    pytest.param(
        Row(hit=False, settings={**on_miss("deny"), "enforcement": "audit"}, denial=MISS_DENIAL),
        id="miss-denied-under-on-miss-deny-whatever-the-pods-mode",
    ),
    pytest.param(
        Row(hit=False, settings=on_miss("deny", modes={"restore-miss": "warn"}), warnings=(MISS,)),
        id="miss-mode-warn-turns-the-denial-into-a-warning",
    ),
    pytest.param(
        Row(hit=False, settings=on_miss("deny", modes={"restore-miss": "audit"})),
        id="miss-mode-audit-only-records-it",
    ),
    pytest.param(
        Row(hit=False, settings=on_miss("warn", modes={"restore-miss": "audit"})),
        id="miss-warning-mode-audit-only-records-it",
    ),
    pytest.param(
        Row(hit=False, settings=on_miss("deny", disabled=["restore-miss"]), rules=()),
        id="miss-disabled-says-nothing",
    ),
    pytest.param(Row(hit=False, settings=on_miss("off"), rules=()), id="miss-off-says-nothing"),
    pytest.param(
        Row(hit=True, settings=cross("warn"), warnings=(CROSS, STALE)),
        id="cross-workload-and-stale-config-warn-in-that-order",
    ),
    pytest.param(
        Row(hit=True, settings=cross("deny"), denial=CROSS_DENIAL),
        id="cross-workload-denied-under-cross-workload-deny",
    ),
    pytest.param(
        Row(
            hit=True,
            settings=cross("deny", modes={"cross-workload": "warn"}),
            warnings=(CROSS, STALE),
        ),
        id="cross-workload-mode-warn-turns-the-denial-into-a-warning",
    ),
    pytest.param(
        Row(hit=True, settings=cross("warn", modes={"cross-workload": "audit"}), warnings=(STALE,)),
        id="cross-workload-mode-audit-only-records-it",
    ),
    pytest.param(
        Row(
            hit=True,
            settings=cross("deny", disabled=["cross-workload"]),
            warnings=(STALE,),
            rules=("stale-config",),
        ),
        id="cross-workload-disabled-says-nothing",
    ),
    pytest.param(
        Row(hit=True, workload="prefill", warnings=(STALE,), rules=("stale-config",)),
        id="stale-config-warns-for-a-snapshot-of-the-pods-own-workload",
    ),
    pytest.param(
        Row(hit=True, workload="prefill", settings={"rules": {"modes": {"stale-config": "audit"}}}),
        id="stale-config-mode-audit-only-records-it",
    ),
    pytest.param(
        Row(hit=True, workload="prefill", settings={"rules": {"disabled": ["stale-config"]}}),
        id="stale-config-disabled-says-nothing",
    ),
    pytest.param(
        Row(
            hit=True,
            workload="prefill",
            settings={"rules": {"modes": {"stale-config": "enforce"}}},
            warnings=(STALE,),
        ),
        id="stale-config-is-advisory-even-in-mode-enforce",
    ),
    pytest.param(
        Row(collide=True, denial=COLLISION, rules=("helper-collision",)),
        id="collision-denied-in-enforce-mode",
    ),
    pytest.param(
        Row(collide=True, settings={"enforcement": "warn"}, warnings=(COLLISION_WARNING,)),
        id="collision-warns-in-warn-mode",
    ),
    pytest.param(
        Row(
            collide=True,
            settings={"enforcement": "warn", "rules": {"modes": {"helper-collision": "enforce"}}},
            denial=COLLISION,
        ),
        id="collision-mode-enforce-beats-the-pods-warn-mode",
    ),
    pytest.param(
        Row(collide=True, settings={"rules": {"modes": {"helper-collision": "audit"}}}),
        id="collision-mode-audit-only-records-it",
    ),
    pytest.param(
        Row(collide=True, settings={"rules": {"disabled": ["helper-collision"]}}, rules=()),
        id="collision-disabled-says-nothing",
    ),
    pytest.param(
        Row(
            containers=3,
            settings={"injection": {"max_containers": 2}},
            warnings=(TOO_MANY,),
            rules=("too-many-containers",),
        ),
        id="too-many-containers-warns",
    ),
    pytest.param(
        Row(
            containers=3,
            settings={"injection": {"max_containers": 2}, "enforcement": "audit"},
            warnings=(TOO_MANY,),
        ),
        id="too-many-containers-warns-whatever-the-pods-mode",
    ),
    pytest.param(
        Row(
            containers=3,
            settings={
                "injection": {"max_containers": 2},
                "rules": {"modes": {"too-many-containers": "audit"}},
            },
        ),
        id="too-many-containers-mode-audit-only-records-it",
    ),
    pytest.param(
        Row(
            containers=3,
            settings={
                "injection": {"max_containers": 2},
                "rules": {"disabled": ["too-many-containers"]},
            },
            rules=(),
        ),
        id="too-many-containers-disabled-says-nothing",
    ),
]


@pytest.mark.parametrize("row", ROWS)
def test_mutate_findings_follow_rules_disabled_and_modes(row: Row) -> None:
    decision = row.decide()
    assert decision.allowed == (row.denial is None)
    assert decision.message == row.denial
    assert decision.warnings == row.warnings
    if row.denial is not None:
        assert not decision.patch
    if row.rules is not None:
        assert tuple(f.rule for f in decision.audit["findings"]) == row.rules


def test_a_finding_only_recorded_is_counted_under_audit() -> None:
    row = Row(hit=False, settings=on_miss("deny", modes={"restore-miss": "audit"}))
    decision = row.decide()
    assert [f.rule for f in decision.audit["findings"]] == ["restore-miss"]
    assert decision.audit["outcomes"] == ["audit"]
    assert decision.patch  # admitted with its patch


def test_a_collision_outside_enforce_still_skips_the_helpers() -> None:
    for settings in ({"rules": {"disabled": ["helper-collision"]}}, {"enforcement": "audit"}):
        pod = prefill_pod(collide=True)
        admitted = apply(pod, run(make_review(pod), engine_for(**settings)))
        assert admitted["spec"] == pod["spec"]


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        pytest.param({}, ("fail", "high"), id="fails-where-admission-denies-the-miss"),
        pytest.param(
            {"modes": {"restore-miss": "warn"}}, ("warn", "medium"), id="warns-under-mode-warn"
        ),
        pytest.param({"disabled": ["restore-miss"]}, ("warn", "medium"), id="warns-if-disabled"),
    ],
)
def test_the_audits_prediction_result_agrees_with_admission(
    rules: dict[str, Any], expected: tuple[str, str]
) -> None:
    """``admission.audit``'s ``restore-prediction`` result fails exactly where ``/mutate``
    would deny the miss (``rules.restore_miss.miss_denies``)."""
    engine = cluster_engine(hit=False, restore={"on_miss": "deny"}, rules=rules)
    obj = prefill_pod()
    obj["metadata"]["uid"] = "uid-1"
    judgement = judge(obj, "v1", "Pod", engine)
    assert judgement is not None
    (prediction,) = [r for r in judgement.results if r.rule == "restore-prediction"]
    assert (prediction.result, prediction.severity) == expected


BLOCKER = (
    "init container 'fetch' mounts emptyDir 'cache' first and has exited by the checkpoint "
    "(init-emptydir)"
)
FAILS = "snapready: will fail to restore (snap-1): " + BLOCKER


def fetching_pod() -> RawObject:
    """``prefill_pod`` whose init container ``fetch`` is the first to mount emptyDir ``cache``:
    gVisor cannot restore it (rule ``init-emptydir``, tests/gvisor/test_pod_sandbox.py)."""
    pod = prefill_pod()
    cache = {"name": "cache", "mountPath": "/cache"}
    spec = pod["spec"]
    spec["initContainers"] = [container("fetch") | {"volumeMounts": [cache]}]
    spec["containers"][0]["volumeMounts"] = [cache]
    spec["volumes"] = [{"name": "cache", "emptyDir": {}}]
    return pod


def test_a_matching_snapshot_gvisor_cannot_restore_is_warned_and_audited_as_such() -> None:
    """The pod's own fingerprint is Ready (``snap-1``), but the restore would crash-loop: the
    mutating webhook warns ``will fail to restore``, not ``will cold-start``, and the leader's
    audit of the running pod says a new replica cannot restore."""
    pod = fetching_pod()
    stamped = apply(pod, run(make_review(pod), engine_for()))["metadata"]["annotations"]
    engine = with_snapshot(engine_for(), stamped["snapready.io/spec-hash"], "prefill")
    decision = run(make_review(pod), engine)
    assert FAILS in decision.warnings
    assert not any("will cold-start" in w for w in decision.warnings)
    running = apply(pod, decision)  # the audit judges running pods, as admitted
    running["metadata"]["uid"] = "uid-1"
    judgement = judge(running, "v1", "Pod", engine)
    assert judgement is not None
    (prediction,) = [r for r in judgement.results if r.rule == "restore-prediction"]
    assert prediction.message == "a new replica cannot restore (snap-1): " + BLOCKER
    properties = dict(prediction.properties)
    assert (prediction.result, properties["prediction"]) == ("warn", "miss")
    assert (properties["restoreFails"], properties["restoreFailsFrom"]) == (BLOCKER, "pod")


def blocked_engine(**settings: Any) -> Engine:
    """An engine whose Ready ``snap-1`` has ``fetching_pod()``'s admitted fingerprint."""
    pod = fetching_pod()
    stamped = apply(pod, run(make_review(pod), engine_for()))["metadata"]["annotations"]
    return with_snapshot(engine_for(**settings), stamped["snapready.io/spec-hash"], "prefill")


def test_on_miss_deny_refuses_a_match_gvisor_cannot_restore_with_its_own_fix() -> None:
    decision = run(make_review(fetching_pod()), blocked_engine(restore={"on_miss": "deny"}))
    assert not decision.allowed
    assert decision.message == (
        FAILS + ". Set restore.on_miss=warn to admit pods predicted to miss, or mount that "
        "emptyDir first in a native sidecar that keeps running (docs/rules/init-emptydir.md)."
    )


def test_disabling_init_emptydir_turns_its_model_off_in_the_prediction() -> None:
    """``init-emptydir`` is a warning because GKE's runsc build may differ; a team that knows
    GKE restores such pods disables it, and the prediction then says ``hit``."""
    engine = blocked_engine(restore={"on_miss": "deny"}, rules={"disabled": ["init-emptydir"]})
    pod = fetching_pod()
    decision = run(make_review(pod), engine)
    assert decision.allowed, decision.message
    annotations = apply(pod, decision)["metadata"]["annotations"]
    assert annotations["snapready.io/restore-prediction"] == "hit"


def test_a_snapshot_no_pod_can_restore_from_is_warned_and_denied_with_its_own_fix() -> None:
    """The pod's ``fetch`` is a native sidecar (it could be restored), but ``snap-1`` was taken
    from a pod whose ``fetch`` ran to completion: the record's blocker refuses every pod."""
    pod = fetching_pod()
    pod["spec"]["initContainers"][0]["restartPolicy"] = "Always"
    stamped = apply(pod, run(make_review(pod), engine_for()))["metadata"]["annotations"]
    engine = with_snapshot(engine_for(), stamped["snapready.io/spec-hash"], "prefill", BLOCKER)
    warned = run(make_review(pod), engine)
    text = (
        "snapready: will fail to restore from a snapshot no pod can restore (snap-1): its "
        f"origin pod's {BLOCKER}; delete that PodSnapshot"
    )
    assert text in warned.warnings
    annotations = apply(pod, warned)["metadata"]["annotations"]
    assert annotations["snapready.io/restore-reason"] == (
        f"gVisor cannot restore snapshot snap-1: its origin pod's {BLOCKER}; delete that "
        "PodSnapshot"
    )
    strict = with_snapshot(
        engine_for(restore={"on_miss": "deny"}), stamped["snapready.io/spec-hash"], "prefill",
        BLOCKER,
    )  # fmt: skip
    denied = run(make_review(pod), strict)
    assert denied.message == text + (
        ". Set restore.on_miss=warn to admit pods predicted to miss, or have that PodSnapshot "
        "deleted (docs/rules/init-emptydir.md)."
    )
