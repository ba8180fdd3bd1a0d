"""Reinvocation on the real API server: a mutating webhook registered after snapready's changes
hashed fields; snapready (``reinvocationPolicy: IfNeeded``) is called again and rewrites only
``spec-hash``, so the final pod's annotation equals ``snapready hash`` of the live object and the
validating webhook issues no ``hash-drift`` warning. Helpers injected (chart ``injectHelpers``).
The later webhook is ``tests/e2e/later_webhook.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import (
    INJECT_VALUES,
    SPEC_HASH,
    Env,
    compliant_pod,
    environment,
    must,
)
from tests.e2e.later_webhook import HELPERS, LABEL, MIRROR_IMAGE, LaterWebhook, later_webhook
from tests.envtest.controlplane import ControlPlane
from tests.support.kube_raw import Obj
from tests.support.webhooks import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def env(
    control_plane: ControlPlane,
    podsnapshot_crds: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Env]:
    """snapready with helper injection on, serving one namespace (policy ``app=llm``)."""
    with environment(
        control_plane,
        tmp_path_factory.mktemp("e2e-reinvocation"),
        {"reinvoke": {}},
        values=INJECT_VALUES,
    ) as created:
        yield created


@pytest.fixture(scope="module")
def later(env: Env, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaterWebhook]:
    """The later webhook, registered and observed on a dry-run create."""
    workdir = Path(tmp_path_factory.mktemp("later-webhook"))
    with later_webhook(env.api, workdir, env.snapready.instance, env.snapready.scope) as hook:
        namespace = env.namespaces["reinvoke"]

        def active() -> bool:
            reply = env.create(later_pod("probe", "volume"), namespace, dry_run=True)
            names = [volume["name"] for volume in reply.body.get("spec", {}).get("volumes", [])]
            return reply.ok and "cache" in names

        wait_until("the later webhook to be called", active)
        yield hook


def later_pod(name: str, mode: str) -> Obj:
    """A selected, compliant pod that the later webhook changes in ``mode``."""
    return compliant_pod(name, {LABEL: mode})


def drift_warnings(warnings: tuple[str, ...]) -> list[str]:
    return [warning for warning in warnings if "[hash-drift]" in warning]


def snapready_mutations(env: Env, name: str) -> list[tuple[str, int | None]]:
    """(decision, patch op count) of each snapready mutating call for the pod ``name``; the
    first call's count is reported as ``None`` (it depends on what snapready writes)."""
    calls = env.admissions(name=name, kind="Pod", endpoint="mutate")
    counts = [call.get("patchOps") for call in calls]
    return [(call["decision"], None if i == 0 else counts[i]) for i, call in enumerate(calls)]


def test_later_volume_is_covered_by_the_final_spec_hash(env: Env, later: LaterWebhook) -> None:
    namespace = env.namespaces["reinvoke"]
    manifest = later_pod("with-cache", "volume")
    reply = env.create(manifest, namespace)
    live = must(reply)
    assert drift_warnings(reply.warnings) == []
    assert any(volume["name"] == "cache" for volume in live["spec"]["volumes"])
    mounts = [mount["mountPath"] for mount in live["spec"]["containers"][0]["volumeMounts"]]
    assert "/cache" in mounts
    recorded = live["metadata"]["annotations"][SPEC_HASH]
    live_value, manifest_value = env.hash(live, manifest)
    assert recorded == live_value
    assert recorded != manifest_value, "the later webhook's volume is part of the value"
    # snapready: first call (inject + stamp), then re-invoked once for the later change, when
    # it rewrites only the spec-hash annotation (one replace operation).
    assert snapready_mutations(env, "with-cache") == [("patched", None), ("patched", 1)]
    assert [call["initContainers"] for call in later.calls_for("with-cache")] == [[HELPERS]]


def test_policy_engine_rewriting_the_helpers_image_is_recognised(
    env: Env, later: LaterWebhook
) -> None:
    """docs/concepts/helpers.md: the sidecar is recognised by its name, command and mount;
    a rewritten image is neither re-injected nor a collision."""
    namespace = env.namespaces["reinvoke"]
    reply = env.create(later_pod("mirrored", "image"), namespace)
    live = must(reply)
    assert drift_warnings(reply.warnings) == []
    (helpers,) = [c for c in live["spec"]["initContainers"] if c["name"] == HELPERS]
    assert len(live["spec"]["initContainers"]) == 1
    assert helpers["image"] == MIRROR_IMAGE
    assert helpers["restartPolicy"] == "Always"  # a native sidecar, stored as such
    assert helpers["command"][:2] == ["/bin/sh", "-c"] and "sleep" in helpers["command"][2]
    assert [volume["name"] for volume in live["spec"]["volumes"]].count(HELPERS) == 1
    recorded = live["metadata"]["annotations"][SPEC_HASH]
    assert env.hash(live) == [recorded]
    assert snapready_mutations(env, "mirrored") == [("patched", None), ("patched", 1)]


def test_a_change_after_snapready_reinvocation_is_reported_as_hash_drift(
    env: Env, later: LaterWebhook
) -> None:
    """The control for the two tests above: a webhook that changes the pod again when it is
    itself re-invoked (after snapready's single re-invocation) leaves a stale annotation, and
    the validating webhook says so."""
    namespace = env.namespaces["reinvoke"]
    reply = env.create(later_pod("drifting", "drift"), namespace)
    live = must(reply)
    assert {"cache", "cache-2"} <= {volume["name"] for volume in live["spec"]["volumes"]}
    (warning,) = drift_warnings(reply.warnings)
    assert "reinvocationPolicy" in warning
    recorded = live["metadata"]["annotations"][SPEC_HASH]
    assert env.hash(live) != [recorded]
