"""Issue 27 deliverable 3 and issue 25 deliverable 3 on a real API server.

Signed origin records: a namespace user bound to ``edit`` plus write rights on PodSnapshots (the
attacker of issue 27) rewrites a record, copies a valid one onto another snapshot, or strips the
signature. No replica believes it: the next pod is predicted from what snapready knows, the
leader rewrites the record, a Warning ``SnapshotOriginRejected`` lands on the PodSnapshot and
``rejected`` counts it. A key rotation re-signs without a warning.

Rotated configuration: the origin pod reads Secret ``hf-token`` (env ``secretKeyRef``) and
ConfigMap ``llm-config`` (``envFrom``); the record names both with their resourceVersion; after
the Secret changes the snapshot is ``stale-config`` and a pod predicted to ``hit`` is warned.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.test_evidence import events
from tests.cluster.test_snapshots import GROUP, VERSION, Env, make_env, take_snapshot
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import service_account_token, wait_for
from webhook.kube.config_refs import config_changes
from webhook.kube.outcomes import snapshot_state
from webhook.kube.signing import Keyring, verify
from webhook.kube.snapshots import OriginRecord

ORIGIN, SIGNATURE = "snapready.io/origin", "snapready.io/origin-signature"
OTHER_IMAGE = "registry.example/other@sha256:" + "cd" * 32


def write_keys(folder: Path, **keys: bytes) -> str:
    """A kubelet-like mounted Secret: one file per key id."""
    folder.mkdir(parents=True, exist_ok=True)
    for key_id, key in keys.items():
        (folder / key_id).write_bytes(key)
    return str(folder)


K1, K2 = b"1" * 48, b"2" * 48


@pytest.fixture
def signed(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespace: str,
    podsnapshot_crds: list[str],
    tmp_path: Path,
) -> Iterator[Env]:
    """snapready leading with key k1, one Ready snapshot ``snap-1`` of the ``m1`` pod."""
    keys = write_keys(tmp_path / "keys", k1=K1)
    origin = {"keys_dir": keys, "active_key": "k1"}
    with make_env(control_plane, kube_admin, namespace, origin=origin) as made:
        wait_for("leader", lambda: made.source.state().details.get("leader") == "leader", 20)
        take_snapshot(made)
        yield made


def snapshot(env: Env, name: str) -> dict[str, Any]:
    """The live PodSnapshot ``name``."""
    custom = client.CustomObjectsApi(env.api)
    obj = custom.get_namespaced_custom_object(GROUP, VERSION, env.namespace, "podsnapshots", name)
    return cast("dict[str, Any]", obj)


def attacker(env: Env, plane: ControlPlane, path: Path) -> client.CustomObjectsApi:
    """A namespace user with ``edit`` and patch rights on PodSnapshots (issue 27's attacker)."""
    token = service_account_token(env.api, env.namespace, "tenant")
    rbac = client.RbacAuthorizationV1Api(env.api)
    role = {
        "metadata": {"name": "podsnapshot-writer"},
        "rules": [
            {
                "apiGroups": [GROUP],
                "resources": ["podsnapshots"],
                "verbs": ["get", "list", "patch", "update"],
            }
        ],
    }
    rbac.create_namespaced_role(env.namespace, client.V1Role.model_validate(role))
    for name, kind, ref in (
        ("tenant-edit", "ClusterRole", "edit"),
        ("tenant-ps", "Role", "podsnapshot-writer"),
    ):
        binding = {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": ref},
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": env.namespace}],
        }
        rbac.create_namespaced_role_binding(
            env.namespace, client.V1RoleBinding.model_validate(binding)
        )
    kubeconfig = plane.token_kubeconfig(path, token, namespace=env.namespace, user="tenant")
    return client.CustomObjectsApi(ControlPlane.client_from_kubeconfig(kubeconfig))


def forge(api: client.CustomObjectsApi, env: Env, name: str, annotations: dict[str, Any]) -> None:
    """Patch PodSnapshot annotations as ``api``, retrying while RBAC bindings propagate."""

    def patched() -> bool:
        try:
            api.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                env.namespace,
                "podsnapshots",
                name,
                {"metadata": {"annotations": annotations}},
            )
        except ApiException as error:
            if error.status == 403:
                return False
            raise
        return True

    wait_for("forged as the tenant", patched, timeout=15)


def keyring() -> Keyring:
    return Keyring({"k1": K1, "k2": K2}, "k1")


def good(env: Env, name: str, key_id: str = "k1") -> bool:
    """The live record verifies with ``key_id`` and names the real origin fingerprint."""
    obj = snapshot(env, name)
    annotations, uid = obj["metadata"].get("annotations") or {}, obj["metadata"]["uid"]
    value = annotations.get(ORIGIN)
    if not isinstance(value, str):
        return False
    found, _ = verify(
        keyring(),
        annotations.get(SIGNATURE),
        uid=uid,
        namespace=env.namespace,
        name=name,
        value=value,
    )
    record = OriginRecord.from_json(value)
    return found == key_id and record is not None and record.spec_hash == env.origin_hash


def test_records_are_signed_and_bound_to_their_snapshot(signed: Env) -> None:
    env = signed
    assert good(env, "snap-1")
    view = env.source.state().snapshots.named(env.namespace, "snap-1")
    assert view is not None and view.origin_key == "k1" and view.origin_rejected is None


def test_a_forged_record_is_ignored_rewritten_and_reported(
    signed: Env, control_plane: ControlPlane, tmp_path: Path
) -> None:
    env = signed
    other = env.pod("other", container={"image": OTHER_IMAGE})
    other_hash = env.annotations(other)["snapready.io/spec-hash"]
    assert env.annotations(other)["snapready.io/restore-prediction"] == "miss"
    live = OriginRecord.from_json(snapshot(env, "snap-1")["metadata"]["annotations"][ORIGIN])
    assert live is not None
    forged = OriginRecord(
        pod=live.pod, spec_hash=other_hash, fields={}, node=live.node, group=live.group
    ).to_json()
    tenant = attacker(env, control_plane, tmp_path / "tenant.kubeconfig")
    forge(tenant, env, "snap-1", {ORIGIN: forged})  # signature left as it was: a mismatch

    wait_for("rejected and counted", lambda: env.source.origins.rejected["mismatch"] >= 1, 15)
    # Never predicted from the forgery: at no point is the other image's pod a hit.
    assert env.annotations(other)["snapready.io/restore-prediction"] != "hit"
    wait_for("rewritten", lambda: good(env, "snap-1"), timeout=15)
    wait_for(
        "warning on the PodSnapshot",
        lambda: events(env, "SnapshotOriginRejected", "snap-1"),
        timeout=15,
    )
    (event,) = events(env, "SnapshotOriginRejected", "snap-1")
    assert event["type"] == "Warning" and "mismatch" in event["note"]
    assert env.annotations(other)["snapready.io/restore-prediction"] == "miss"
    assert env.annotations(env.pod("same"))["snapready.io/restore-prediction"] == "hit"


def test_a_record_copied_to_another_snapshot_or_unsigned_is_rejected(
    signed: Env, control_plane: ControlPlane, tmp_path: Path
) -> None:
    env = signed
    take_snapshot(env, "snap-2", origin="origin-2", labels={"model": "m2"})
    first = snapshot(env, "snap-1")["metadata"]["annotations"]
    tenant = attacker(env, control_plane, tmp_path / "tenant.kubeconfig")
    # snap-1's valid record and signature, pasted onto snap-2 (another uid): the m1 group's
    # pods would restore snap-2's m2 memory if it were believed.
    forge(tenant, env, "snap-2", {ORIGIN: first[ORIGIN], SIGNATURE: first[SIGNATURE]})
    wait_for("copy rejected", lambda: env.source.origins.rejected["mismatch"] >= 1, 15)
    wait_for("snap-2 rewritten", lambda: _group(env, "snap-2") == {"model": "m2"}, 15)
    forge(tenant, env, "snap-1", {SIGNATURE: None})
    wait_for("unsigned rejected", lambda: env.source.origins.rejected["unsigned"] >= 1, 15)
    wait_for("snap-1 re-signed", lambda: good(env, "snap-1"), 15)
    assert events(env, "SnapshotOriginRejected", "snap-1")
    assert events(env, "SnapshotOriginRejected", "snap-2")


def _group(env: Env, name: str) -> dict[str, str] | None:
    obj = snapshot(env, name)
    annotations, uid = obj["metadata"].get("annotations") or {}, obj["metadata"]["uid"]
    found, _ = verify(
        keyring(),
        annotations.get(SIGNATURE),
        uid=uid,
        namespace=env.namespace,
        name=name,
        value=str(annotations.get(ORIGIN)),
    )
    record = OriginRecord.from_json(annotations.get(ORIGIN))
    return dict(record.group) if found and record is not None else None


def test_a_rotated_key_re_signs_records_without_a_warning(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespace: str,
    podsnapshot_crds: list[str],
    tmp_path: Path,
) -> None:
    old = {"keys_dir": write_keys(tmp_path / "old", k1=K1), "active_key": "k1"}
    with make_env(control_plane, kube_admin, namespace, origin=old) as env:
        wait_for("leader", lambda: env.source.state().details.get("leader") == "leader", 20)
        take_snapshot(env)
        assert good(env, "snap-1", "k1")
        value = snapshot(env, "snap-1")["metadata"]["annotations"][ORIGIN]
        origin_hash = env.origin_hash
    with contextlib.suppress(ApiException):  # the first run's Lease: released or expiring
        client.CoordinationV1Api(kube_admin).delete_namespaced_lease(
            f"snapready-{namespace}"[:60], namespace
        )
    new = {"keys_dir": write_keys(tmp_path / "new", k1=K1, k2=K2), "active_key": "k2"}
    with make_env(control_plane, kube_admin, namespace, origin=new) as env:
        env.origin_hash = origin_hash
        wait_for("re-signed with k2", lambda: good(env, "snap-1", "k2"), timeout=30)
        assert snapshot(env, "snap-1")["metadata"]["annotations"][ORIGIN] == value
        assert sum(env.source.origins.rejected.values()) == 0
        assert events(env, "SnapshotOriginRejected") == []


# --- stale-config ---------------------------------------------------------------------------

READS_CONFIG = {
    "container": {
        "env": [
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}},
            }
        ],
        "envFrom": [{"configMapRef": {"name": "llm-config"}}],
    }
}


def test_a_changed_secret_marks_the_snapshot_stale_config_and_warns_a_hit(
    signed: Env,
) -> None:
    env = signed
    core = client.CoreV1Api(env.api)
    secret = {"metadata": {"name": "hf-token"}, "stringData": {"token": "hf_old"}}
    core.create_namespaced_secret(env.namespace, client.V1Secret.model_validate(secret))
    config = {"metadata": {"name": "llm-config"}, "data": {"MODEL": "m1"}}
    core.create_namespaced_config_map(env.namespace, client.V1ConfigMap.model_validate(config))
    take_snapshot(env, "snap-cfg", origin="origin-cfg", labels={"model": "cfg"}, **READS_CONFIG)
    record = OriginRecord.from_json(snapshot(env, "snap-cfg")["metadata"]["annotations"][ORIGIN])
    assert record is not None and record.config is not None
    names = {(ref.kind, ref.name): ref for ref in record.config}
    assert set(names) == {("Secret", "hf-token"), ("ConfigMap", "llm-config")}
    metadata = core.read_namespaced_secret("hf-token", env.namespace).metadata
    assert metadata is not None
    live_rv = metadata.resource_version
    assert names[("Secret", "hf-token")].version == live_rv
    assert "hf_old" not in snapshot(env, "snap-cfg")["metadata"]["annotations"][ORIGIN]

    hit = env.pod("replica", labels={"model": "cfg"}, **READS_CONFIG)

    def view() -> Any:
        return env.source.state().snapshots.named(env.namespace, "snap-cfg")

    wait_for("namespace watched", lambda: env.namespace in env.source.state().configs, 15)
    assert snapshot_state(view(), env.source.state().node_pools, env.source.state().configs) == (
        "ready"
    )
    decision = env.mutate(hit)
    assert not any("stale-config" in w for w in decision.warnings)

    time.sleep(1.1)  # managedFields times have one-second resolution
    # A label edit (another field manager, as `kubectl label` is) changes no value: not stale.
    label = {"metadata": {"labels": {"team": "ml"}}}
    core.patch_namespaced_secret("hf-token", env.namespace, label, field_manager="kubectl-label")
    wait_for(
        "label edit seen",
        lambda: (
            env.source.state().configs[env.namespace][("Secret", "hf-token")].version != live_rv
        ),
        timeout=15,
    )
    assert snapshot_state(view(), env.source.state().node_pools, env.source.state().configs) == (
        "ready"
    )
    time.sleep(1.1)
    core.patch_namespaced_secret("hf-token", env.namespace, {"stringData": {"token": "hf_new"}})
    wait_for(
        "stale-config",
        lambda: (
            snapshot_state(view(), env.source.state().node_pools, env.source.state().configs)
            == "stale-config"
        ),
        timeout=15,
    )
    (change,) = config_changes(view(), env.source.state().configs)
    assert (change.kind, change.name, change.what) == ("Secret", "hf-token", "changed")
    decision = env.mutate(hit)
    assert env.annotations(hit)["snapready.io/restore-prediction"] == "hit"
    (line,) = [w for w in decision.warnings if "stale-config" in w]
    assert "restores with the value of Secret hf-token from before its change at 20" in line

    core.delete_namespaced_config_map("llm-config", env.namespace)
    wait_for(
        "deleted ConfigMap seen",
        lambda: len(config_changes(view(), env.source.state().configs)) == 2,
        timeout=15,
    )


def _cli(env: Env, *args: str, key_secret: str) -> dict[str, Any]:
    """``snapready <args> --format json`` as a user with the admin kubeconfig."""
    command = [
        str(Path(sys.executable).with_name("snapready")),
        *args,
        "-n",
        env.namespace,
        "--kubeconfig",
        str(KUBECONFIG[0]),
        "--format",
        "json",
    ]
    environment = {**os.environ, "SNAPREADY_ORIGIN__KEY_SECRET": key_secret}
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=60, env=environment, check=False
    )
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


KUBECONFIG: list[Path] = []


def test_status_and_explain_verify_records_and_show_stale_config(
    signed: Env, control_plane: ControlPlane
) -> None:
    env = signed
    KUBECONFIG[:] = [Path(control_plane.admin_kubeconfig)]
    core = client.CoreV1Api(env.api)
    keys = {"metadata": {"name": "origin-keys"}, "data": {"k1": base64.b64encode(K1).decode()}}
    core.create_namespaced_secret(env.namespace, client.V1Secret.model_validate(keys))
    secret = {"metadata": {"name": "hf-token"}, "stringData": {"token": "hf_old"}}
    core.create_namespaced_secret(env.namespace, client.V1Secret.model_validate(secret))
    config = {"metadata": {"name": "llm-config"}, "data": {"MODEL": "m1"}}
    core.create_namespaced_config_map(env.namespace, client.V1ConfigMap.model_validate(config))
    take_snapshot(env, "snap-cfg", origin="origin-cfg", labels={"model": "cfg"}, **READS_CONFIG)
    time.sleep(1.1)  # managedFields times have one-second resolution
    core.patch_namespaced_secret("hf-token", env.namespace, {"stringData": {"token": "hf_new"}})
    assert env.source.stop(timeout=15)  # nobody repairs the forgery: what the CLI concludes
    other = OriginRecord(pod="origin", spec_hash="v1:sha256:" + "9" * 64).to_json()
    # Legacy annotation record, written as GKE's controller (the guard refuses everyone else).
    client.CustomObjectsApi(env.gke).patch_namespaced_custom_object(
        GROUP, VERSION, env.namespace, "podsnapshots", "snap-1",
        {"metadata": {"annotations": {ORIGIN: other}}},
    )  # fmt: skip

    report = _cli(env, "status", key_secret=f"{env.namespace}/origin-keys")
    assert not [n for n in report["notes"] if "not verified" in n]
    (block,) = report["policies"]
    snapshots = block["snapshots"]
    assert snapshots["staleConfig"] == 1
    (stale,) = snapshots["staleConfigSnapshots"]
    assert stale["name"] == "snap-cfg"
    assert stale["changes"][0].startswith("Secret hf-token changed at 20")
    assert snapshots["rejectedOrigins"] == [{"name": "snap-1", "reason": "mismatch"}], report[
        "notes"
    ]

    explained = _cli(env, "explain", "origin-cfg", key_secret=f"{env.namespace}/origin-keys")
    assert explained["prediction"]["outcome"] == "hit"
    assert explained["prediction"]["snapshot"] == "snap-cfg"
    assert explained["prediction"]["staleConfig"][0].startswith("Secret hf-token changed at")

    unverified = _cli(env, "status", key_secret=f"{env.namespace}/missing")
    assert any("origin records not verified" in n for n in unverified["notes"])
    (block,) = unverified["policies"]
    assert block["snapshots"]["rejectedOrigins"] == []  # believed: nothing to check with


def test_a_redirected_origin_pod_or_a_removed_record_is_never_believed(
    signed: Env, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Issue 27 review: the tenant points ``origin-pod`` at a pod of theirs (another image)
    and forges the record; later removes the record, and re-applies one forgery many times."""
    env = signed
    time.sleep(1.1)  # creationTimestamp has whole seconds: evil-origin is younger than snap-1
    other = env.pod("evil-origin", container={"image": OTHER_IMAGE})
    admitted = env.annotations(other)
    other["metadata"]["annotations"] = admitted
    other["spec"]["nodeName"] = env.node
    client.CoreV1Api(env.api).create_namespaced_pod(
        env.namespace, client.V1Pod.model_validate(other)
    )
    probe = env.pod("probe", container={"image": OTHER_IMAGE})
    tenant = attacker(env, control_plane, tmp_path / "tenant.kubeconfig")
    forge(tenant, env, "snap-1", {"podsnapshot.gke.io/origin-pod": "evil-origin", ORIGIN: "{}"})
    wait_for("forgery rejected", lambda: sum(env.source.origins.rejected.values()) >= 1, 15)
    wait_for("repaired from what snapready knew", lambda: good(env, "snap-1"), 15)
    assert env.annotations(probe)["snapready.io/restore-prediction"] != "hit"

    # A leader that never saw the record (a restart): the pod named now was created after
    # the PodSnapshot, so it is not its origin: the rebuilt record knows no fingerprint.
    settled(env, "snap-1")
    env.source.origins._known = Forgetful()  # a leader that has seen no record (restarted)
    forge(tenant, env, "snap-1", {ORIGIN: '{"v": 1}'})
    wait_for(
        "rebuilt as unknown",
        lambda: _spec_hash(env, "snap-1") is None and _signed(env, "snap-1"),
        timeout=15,
    )
    assert env.annotations(probe)["snapready.io/restore-prediction"] != "hit"

    # Removed: repaired and reported (reason "removed").
    forge(tenant, env, "snap-1", {"podsnapshot.gke.io/origin-pod": "origin"})
    forge(tenant, env, "snap-1", {ORIGIN: None, SIGNATURE: None})
    wait_for("record rebuilt from the real origin", lambda: good(env, "snap-1"), 15)
    settled(env, "snap-1")
    env.source.origins._known = {}  # remembers again from here on
    env.source.origins.notify()  # a pass (the recheck would come within a minute)
    wait_for("record remembered", lambda: bool(env.source.origins._known), 15)
    forge(tenant, env, "snap-1", {ORIGIN: None, SIGNATURE: None})
    wait_for("removal reported", lambda: env.source.origins.rejected["removed"] >= 1, 15)
    wait_for("removed record restored", lambda: good(env, "snap-1"), 15)

    # One forged value applied again and again: reported once.
    before = env.source.origins.rejected["mismatch"]
    forged = OriginRecord(pod="origin", spec_hash="v1:sha256:" + "7" * 64).to_json()
    for _ in range(3):
        forge(tenant, env, "snap-1", {ORIGIN: forged})
        wait_for("repaired", lambda: good(env, "snap-1"), 15)
    assert env.source.origins.rejected["mismatch"] == before + 1


class Forgetful(dict[str, OriginRecord]):
    """The recorder's memory of believed records, losing everything (as after a restart)."""

    def __setitem__(self, key: str, value: OriginRecord) -> None:
        return None


def settled(env: Env, name: str) -> None:
    """The leader's last write of ``name`` is in its cache and its pass after it is done."""

    def cached() -> bool:
        view = env.source.state().snapshots.named(env.namespace, name)
        return view is not None and view.origin_key == "k1"

    wait_for("the repaired record cached", cached, timeout=15)
    time.sleep(1.0)


def _spec_hash(env: Env, name: str) -> str | None:
    record = OriginRecord.from_json(snapshot(env, name)["metadata"]["annotations"].get(ORIGIN))
    return record.spec_hash if record is not None else "unreadable"


def _signed(env: Env, name: str) -> bool:
    obj = snapshot(env, name)
    annotations = obj["metadata"].get("annotations") or {}
    found, _ = verify(
        keyring(),
        annotations.get(SIGNATURE),
        uid=obj["metadata"]["uid"],
        namespace=env.namespace,
        name=name,
        value=str(annotations.get(ORIGIN)),
    )
    return found is not None
