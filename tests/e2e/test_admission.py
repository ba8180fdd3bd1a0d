"""Pods through a real kube-apiserver and snapready installed from the chart (helpers injected).

One snapready per module (and xdist worker), cluster mode, running as the chart's ServiceAccount;
namespaces: ``enforce`` and ``warn`` (label ``snapready.io/enforcement=warn``), each with a
PodSnapshotPolicy selecting ``app=llm``, and ``late`` (no policy until a test creates one).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.conftest import (
    INJECT_VALUES,
    POLICY_ANNOTATION,
    SPEC_HASH,
    Env,
    compliant_pod,
    environment,
    must,
    policy,
    violating_pod,
)
from tests.envtest.controlplane import ControlPlane
from tests.support import kube_raw
from tests.support.kube_raw import Obj
from tests.support.snapready_proc import peer_ports, rotate_serving_cert, served_serial

pytestmark = pytest.mark.e2e


def without_token(spec: Obj) -> Obj:
    """``spec`` without the ServiceAccount plugin's ``kube-api-access-<random>`` volume and
    mounts (each pod gets its own suffix)."""
    stripped = copy.deepcopy(spec)
    token = "kube-api-access-"
    stripped["volumes"] = [v for v in stripped["volumes"] if not v["name"].startswith(token)]
    for key in ("containers", "initContainers"):
        for container in stripped.get(key, []):
            mounts = container.get("volumeMounts", [])
            container["volumeMounts"] = [m for m in mounts if not m["name"].startswith(token)]
    return stripped


@pytest.fixture(scope="module")
def env(
    control_plane: ControlPlane,
    podsnapshot_crds: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Env]:
    """snapready with helper injection on, serving the ``enforce``/``warn``/``late`` namespaces."""
    with environment(
        control_plane,
        tmp_path_factory.mktemp("e2e-admission"),
        {"enforce": {}, "warn": {"snapready.io/enforcement": "warn"}, "late": {}},
        policies={"enforce": {"app": "llm"}, "warn": {"app": "llm"}},
        values=INJECT_VALUES,
    ) as created:
        yield created


def test_selected_pod_without_gvisor_is_denied_with_the_rule_id(env: Env) -> None:
    namespace = env.namespaces["enforce"]
    reply = env.create(violating_pod("no-gvisor"), namespace)
    assert reply.status == 403, reply.body
    assert "[gvisor-runtime]" in reply.message
    assert "llm-policy" in reply.message
    assert "runtimeClassName" in reply.message
    assert env.create(compliant_pod("no-gvisor"), namespace, dry_run=True).ok  # the name is free


def test_warn_namespace_admits_with_the_rule_in_a_warning_header(env: Env) -> None:
    namespace = env.namespaces["warn"]
    reply = env.create(violating_pod("warned"), namespace)
    assert reply.ok, reply.body
    gvisor = [w for w in reply.warnings if "[gvisor-runtime]" in w]
    assert len(gvisor) == 1, reply.warnings
    assert SPEC_HASH in reply.annotations()  # still mutated: warn mode never blocks


def test_enforce_namespace_compliant_pod_has_no_warning(env: Env) -> None:
    reply = env.create(compliant_pod("clean"), env.namespaces["enforce"])
    assert reply.ok, reply.body
    assert reply.warnings == ()
    annotations = reply.annotations()
    assert annotations[POLICY_ANNOTATION] == "llm-policy"
    assert annotations[SPEC_HASH].startswith("v1:sha256:")


def scope_status(env: Env) -> str:
    """The ``webhookScope`` entry of ``/readyz`` (e.g. ``synced (policies, 2 policies)``)."""
    status: str = env.snapready.process.readyz()[1].get("webhookScope", "")
    return status


def test_unselected_pod_is_untouched(env: Env) -> None:
    """Not selected: allowed without any change. With the chart's dynamic webhook scope at its
    precise level the API server does not even call snapready; the scope falls back to whole
    namespaces when the cluster's policies make the CEL expression too long (other tests'
    policies count: the control plane is shared), and then the call is made and answered with
    no patch."""
    pod = violating_pod("other", {"app": "other"})
    pod["metadata"]["labels"] = {"app": "other"}
    before = scope_status(env)
    reply = env.create(pod, env.namespaces["enforce"])
    after = scope_status(env)
    assert reply.ok, reply.body
    assert reply.warnings == ()
    assert not [key for key in reply.annotations() if key.startswith("snapready.io/")]
    spec = reply.body["spec"]
    assert "initContainers" not in spec
    assert [v["name"] for v in spec["volumes"]] == [spec["volumes"][0]["name"]]  # the SA token
    calls = env.admissions(name="other")
    assert [(c["endpoint"], c["decision"]) for c in calls] in (
        [],
        [("mutate", "allowed"), ("validate", "allowed")],
    )
    precise = all(status.startswith("synced (policies") for status in (before, after))
    if env.scope_mode == "dynamic" and precise:  # the leader's matchCondition filtered it
        assert calls == []


def test_server_side_dry_run_gets_the_same_answer_and_creates_nothing(env: Env) -> None:
    namespace = env.namespaces["enforce"]
    dry_denied = env.create(violating_pod("dry-bad"), namespace, dry_run=True)
    real_denied = env.create(violating_pod("dry-bad"), namespace)
    assert (dry_denied.status, dry_denied.message) == (real_denied.status, real_denied.message)
    assert dry_denied.status == 403
    assert "[gvisor-runtime]" in dry_denied.message

    dry = env.create(compliant_pod("dry-ok"), namespace, dry_run=True)
    assert dry.ok, dry.body
    missing = kube_raw.request(env.api, "GET", f"/api/v1/namespaces/{namespace}/pods/dry-ok")
    assert missing.status == 404, "a dry run created the pod"
    real = env.create(compliant_pod("dry-ok"), namespace)
    assert real.ok, real.body
    assert dry.annotations() == real.annotations()
    # Equal but for the ServiceAccount token volume's random suffix.
    assert without_token(dry.body["spec"]) == without_token(real.body["spec"])
    assert env.admissions(endpoint="mutate", name="dry-ok", dryRun=True)


def test_delete_label_update_and_binding_are_not_blocked(env: Env) -> None:
    namespace = env.namespaces["enforce"]
    must(env.create(compliant_pod("lifecycle"), namespace))
    pod_path = f"/api/v1/namespaces/{namespace}/pods/lifecycle"

    # A label UPDATE: even one that makes the pod unselected, then selected again.
    for labels in ({"app": "other", "tier": "x"}, {"app": "llm", "tier": None}):
        patch = {"metadata": {"labels": labels}}
        reply = kube_raw.request(
            env.api, "PATCH", pod_path, patch, content_type="application/merge-patch+json"
        )
        assert reply.ok, reply.body
    labels = reply.body["metadata"]["labels"]
    assert labels["app"] == "llm"
    assert "tier" not in labels

    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "lifecycle"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    reply = kube_raw.request(env.api, "POST", f"{pod_path}/binding", binding)
    assert reply.status == 201, reply.body
    assert must(kube_raw.request(env.api, "GET", pod_path))["spec"]["nodeName"] == "node-1"

    reply = kube_raw.request(env.api, "DELETE", pod_path, {"gracePeriodSeconds": 0})
    assert reply.ok, reply.body
    assert kube_raw.request(env.api, "GET", pod_path).status == 404


def test_spec_hash_equals_snapready_hash_of_manifest_and_of_live_object(env: Env) -> None:
    namespace = env.namespaces["enforce"]
    manifest = compliant_pod("hashed")
    manifest["metadata"]["annotations"] = {"dev.gvisor.internal.example": "on"}
    created = must(env.create(copy.deepcopy(manifest), namespace))
    live = env.get(manifest, namespace)
    recorded = live["metadata"]["annotations"][SPEC_HASH]
    assert created["metadata"]["annotations"][SPEC_HASH] == recorded
    assert env.hash(manifest, live) == [recorded, recorded]
    # The helpers were injected (chart injectHelpers=true) and are part of the value.
    assert [c["name"] for c in live["spec"]["initContainers"]] == ["snapready-helpers"]
    assert env.hash(manifest, args=("--no-inject",)) != [recorded]


def test_ephemeral_containers_privileged_denied_plain_allowed(env: Env) -> None:
    namespace = env.namespaces["enforce"]
    must(env.create(compliant_pod("debugged"), namespace))
    path = f"/api/v1/namespaces/{namespace}/pods/debugged/ephemeralcontainers"

    def add(name: str, privileged: bool) -> kube_raw.Reply:
        container = {"name": name, "image": "busybox:1.36", "command": ["sh"], "stdin": True}
        if privileged:
            container["securityContext"] = {"privileged": True}
        patch = {"spec": {"ephemeralContainers": [container]}}
        return kube_raw.request(
            env.api, "PATCH", path, patch, content_type="application/strategic-merge-patch+json"
        )

    denied = add("root-shell", privileged=True)
    assert denied.status == 403, denied.body
    assert "[sandbox-compat]" in denied.message
    assert "ephemeralContainers" in denied.message
    allowed = add("shell", privileged=False)
    assert allowed.ok, allowed.body
    names = [c["name"] for c in allowed.body["spec"]["ephemeralContainers"]]
    assert names == ["shell"]


def test_policy_created_while_running_is_enforced_within_5_seconds(env: Env) -> None:
    namespace = env.namespaces["late"]
    pod = violating_pod("late", {"team": "late"})
    assert env.create(pod, namespace, dry_run=True).ok, "selected before the policy exists"
    created = env.create(policy("late-policy", {"team": "late"}, env.storage_config), namespace)
    assert created.ok, created.body
    started = time.monotonic()
    while True:
        reply = env.create(pod, namespace, dry_run=True)
        elapsed = time.monotonic() - started
        if reply.status == 403:
            break
        assert reply.ok, reply.body
        assert elapsed < 5, "the new policy was not enforced within 5 s"
        time.sleep(0.05)
    assert "[gvisor-runtime]" in reply.message
    assert "late-policy" in reply.message
    assert elapsed < 5


def test_service_account_plugin_does_not_reinvoke_snapready(env: Env) -> None:
    """What the real API server does to a pod snapready injected into (helpers on, no other
    webhook): after a webhook mutates, kube-apiserver re-runs its built-in mutating plugins. The
    ServiceAccount plugin would mount its token into a new init container, which would count as
    a change and call snapready a second time (``reinvocationPolicy: IfNeeded``); snapready's init
    container already carries that mount, so there is one mutating call per pod, and the live
    init container holds exactly the two mounts."""
    namespace = env.namespaces["enforce"]
    live = must(env.create(compliant_pod("reinvoked"), namespace))
    (helpers,) = live["spec"]["initContainers"]
    mounts = [m["mountPath"] for m in helpers["volumeMounts"]]
    assert mounts == ["/snapready", "/var/run/secrets/kubernetes.io/serviceaccount"]
    calls = env.admissions(name="reinvoked", kind="Pod")
    summary = [(c["endpoint"], c["decision"], bool(c.get("patchOps"))) for c in calls]
    assert summary == [("mutate", "patched", True), ("validate", "allowed", False)]
    assert env.hash(live) == [live["metadata"]["annotations"][SPEC_HASH]]


def test_serving_cert_rotation_while_pods_are_created_fails_no_create(env: Env) -> None:
    """The serving pair is replaced (cert first, then key: a mismatched pair sits on disk for a
    moment) while pods are created through the API server; then more creates run in parallel so
    the API server opens new connections, whose handshakes get the new certificate (same CA,
    unchanged caBundle). Not one create may fail."""
    namespace = env.namespaces["enforce"]
    process = env.snapready.process
    old_serial = served_serial(process.port, process.ca_file)
    failures: list[str] = []
    created = 0
    lock = threading.Lock()

    def create_one() -> None:
        nonlocal created
        pod = compliant_pod("")
        del pod["metadata"]["name"]
        pod["metadata"]["generateName"] = "rotation-"
        reply = env.create(pod, namespace)
        with lock:
            created += 1
            if not reply.ok or SPEC_HASH not in reply.annotations():
                failures.append(f"{reply.status}: {reply.message}")

    deadline = time.monotonic() + 30
    for _ in range(10):  # sequential: the API server keeps reusing one connection
        create_one()
    new_serial = rotate_serving_cert(process.cert_dir)
    while served_serial(process.port, process.ca_file) != new_serial:
        create_one()
        assert time.monotonic() < deadline, "the new certificate was never served"
    before = peer_ports(process.port)
    with ThreadPoolExecutor(max_workers=6) as pool:
        for future in [pool.submit(create_one) for _ in range(36)]:
            future.result()
    new_connections = peer_ports(process.port) - before
    assert failures == [], failures
    assert new_serial != old_serial
    assert created >= 46
    assert new_connections, "the API server opened no connection after the rotation"
    assert "reloaded serving certificate" in process.log()


def test_storage_config_governance_reaches_only_its_instance(env: Env) -> None:
    """PodSnapshotStorageConfigs are cluster-scoped (no namespaceSelector applies): snapready's
    governance denies a bucket named like an IP address; the test scope (a matchCondition on
    the instance label, tests/support/webhooks.py) keeps other tiers' objects from it."""
    config: Obj = {
        "apiVersion": "podsnapshot.gke.io/v1",
        "kind": "PodSnapshotStorageConfig",
        "metadata": {"name": f"ip-bucket-{env.snapready.instance}", "labels": {}},
        "spec": {"snapshotStorageConfig": {"gcs": {"bucket": "192.168.5.4"}}},
    }
    assert kube_raw.create(env.api, config, dry_run=True).ok  # not this instance's
    config["metadata"]["labels"] = env.snapready.scope
    reply = kube_raw.create(env.api, config, dry_run=True)
    assert reply.status == 403, reply.body
    assert "[bucket-name]" in reply.message
