"""SnapshotRecords on the real control plane under GKE's guard (issue 31, deliverable 9).

The control plane carries GKE's ValidatingAdmissionPolicy on PodSnapshots (only the identity
playing GKE's controller may write them; ``tests/data/gke/``), snapready runs as its own
ServiceAccount with the chart's RBAC (``make_env``), and GKE's writes go through
``Env.gke``. What is checked: the record is written into snapready's own object and never on
the PodSnapshot; a record left from a deleted snapshot of the same name is replaced; a removed
record comes back; an older snapready's ``snapready.io/origin`` annotation is converted once;
a namespace user with ``edit`` can read records but neither write nor forge one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import jsonpatch
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.controllers.test_snapshots import (
    GROUP,
    VERSION,
    Env,
    make_env,
    take_snapshot,
)
from tests.cluster.controllers.test_snapshots import env as env  # noqa: PLC0414 - the fixture, shared
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import service_account_token, wait_for
from tests.support.records import get_record, records_in, view_of, wait_record
from webhook.snapshots.views import OriginRecord, SnapshotView

RECORDS = ("snapready.io", "v1alpha1", "snapshotrecords")
SPEC_HASH = "snapready.io/spec-hash"


def wait_cached(env: Env, name: str) -> SnapshotView:
    """Until every replica's cache has PodSnapshot ``name`` with its record; that view."""

    def cached() -> SnapshotView | None:
        view = env.source.state().snapshots.named(env.namespace, name)
        return view if view is not None and view.origin is not None else None

    found = wait_for(f"the record of {name} cached", cached, timeout=10)
    assert found is not None
    return found


def _snapshot(env: Env, name: str) -> dict[str, Any]:
    return cast(
        "dict[str, Any]",
        client.CustomObjectsApi(env.api).get_namespaced_custom_object(
            GROUP, VERSION, env.namespace, "podsnapshots", name
        ),
    )


def test_the_record_is_snapreadys_and_the_twin_hits(env: Env) -> None:
    """The record is a SnapshotRecord snapready wrote; the PodSnapshot stays as GKE wrote it;
    the twin of the origin pod predicts ``hit``, a changed image ``miss`` naming the field."""
    take_snapshot(env)
    snapshot = _snapshot(env, "snap-1")
    assert not [k for k in snapshot["metadata"].get("annotations", {}) if "snapready" in k]
    record = view_of(wait_record(env.api, env.namespace, "snap-1")).record
    assert record.spec_hash == env.origin_hash
    twin = env.annotations(env.pod("twin"))
    assert (twin["snapready.io/restore-prediction"], twin["snapready.io/restore-snapshot"]) == (
        "hit",
        "snap-1",
    )
    image = env.annotations(env.pod("image", container={"image": "registry.example/llm:v9"}))
    assert image["snapready.io/restore-prediction"] == "miss"
    assert "spec.containers[0].image" in image["snapready.io/restore-reason"]


def test_a_removed_record_is_written_again(env: Env) -> None:
    take_snapshot(env)
    before = view_of(wait_record(env.api, env.namespace, "snap-1"))
    custom = client.CustomObjectsApi(env.api)
    custom.delete_namespaced_custom_object(*RECORDS[:2], env.namespace, RECORDS[2], "snap-1")
    env.source.origins.notify()

    def again() -> dict[str, Any] | None:
        found = get_record(env.api, env.namespace, "snap-1")
        return found if found and found["metadata"].get("deletionTimestamp") is None else None

    found = wait_for("the record written again", again, timeout=20)
    assert found is not None
    restored = view_of(found)
    assert restored.record == before.record
    assert env.source.origins.actions["restored"] == 1


def test_a_record_of_an_earlier_snapshot_of_the_same_name_is_replaced(env: Env) -> None:
    """GKE deletes and re-creates a PodSnapshot under the same name (another uid) before the
    garbage collector removed the old record: the old record is never believed for the new
    snapshot, and the leader replaces it."""
    take_snapshot(env)
    old = view_of(wait_record(env.api, env.namespace, "snap-1"))
    gke = client.CustomObjectsApi(env.gke)
    gke.delete_namespaced_custom_object(GROUP, VERSION, env.namespace, "podsnapshots", "snap-1")
    wait_for(
        "snapshot gone from the cache",
        lambda: env.source.state().snapshots.named(env.namespace, "snap-1") is None,
        timeout=10,
    )
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodSnapshot",
        "metadata": {
            "name": "snap-1",
            "annotations": {"podsnapshot.gke.io/origin-pod": "origin"},
        },
        "spec": {"policyName": "llm-policy"},
    }
    created = gke.create_namespaced_custom_object(
        GROUP, VERSION, env.namespace, "podsnapshots", body
    )
    new_uid = cast("dict[str, Any]", created)["metadata"]["uid"]
    assert new_uid != old.snapshot_uid

    def replaced() -> bool:
        found = get_record(env.api, env.namespace, "snap-1")
        return found is not None and view_of(found).snapshot_uid == new_uid

    wait_for("a record of the new snapshot", replaced, timeout=20)
    # The origin pod was created before the new PodSnapshot: the new record describes it, and
    # the cache believes it for the new uid only.
    view = wait_cached(env, "snap-1")
    assert view.uid == new_uid and view.origin is not None
    assert view.origin.spec_hash == env.origin_hash


def test_an_older_snapreadys_annotation_is_converted_once(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespace: str,
    podsnapshot_crds: list[str],
) -> None:
    """Records written as ``snapready.io/origin`` by a snapready before SnapshotRecords (on a
    cluster without GKE's guard: here written through GKE's identity under snapready's old
    field manager) are converted once, as they were: the origin pod is gone by then, so the
    converted fingerprint can only come from the annotation. Where the live origin pod checks out
    (its stamp is the annotation's fingerprint), the record also gets its ``restoreBlocker``."""
    gke = control_plane.gke_client()
    legacy = OriginRecord(
        pod="gone-origin",
        spec_hash="v1:sha256:" + "cd" * 32,
        fields={"spec.containers[0].image": "0123456789ab"},
        node={"pool": "old-pool", "version": "1.35.3-gke.1234000"},
        group={"model": "m1"},
    )
    foreign = OriginRecord(pod="gone-origin", spec_hash="v1:sha256:" + "ee" * 32)
    # A live origin pod admission stamped: an annotation claiming snapready's old field manager
    # but another fingerprint than the stamp is a forgery, not converted.
    stamped = {"snapready.io/spec-hash": "v1:sha256:" + "aa" * 32}
    live = {
        "metadata": {"name": "alive-origin", "annotations": stamped},
        "spec": {"containers": [{"name": "c", "image": "registry.example/x"}]},
    }
    client.CoreV1Api(kube_admin).create_namespaced_pod(namespace, client.V1Pod.model_validate(live))
    claimed = OriginRecord(pod="alive-origin", spec_hash="v1:sha256:" + "ee" * 32)
    fetching = OriginRecord(pod="init-origin", spec_hash="v1:sha256:" + "bb" * 32)
    cache = {"name": "cache", "mountPath": "/cache"}
    image = "registry.example/x"
    init_first = {
        "metadata": {"name": "init-origin", "annotations": {SPEC_HASH: fetching.spec_hash}},
        "spec": {
            "initContainers": [{"name": "fetch", "image": image, "volumeMounts": [cache]}],
            "containers": [{"name": "c", "image": image, "volumeMounts": [cache]}],
            "volumes": [{"name": "cache", "emptyDir": {}}],
        },
    }
    client.CoreV1Api(kube_admin).create_namespaced_pod(
        namespace, client.V1Pod.model_validate(init_first)
    )
    custom = client.CustomObjectsApi(gke)
    try:
        for name, record, manager in (
            ("converted", legacy, "snapready-origin"),
            ("not-ours", foreign, "kubectl-edit"),
            ("claimed", claimed, "snapready-origin"),
            ("fetching", fetching, "snapready-origin"),
        ):
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "PodSnapshot",
                "metadata": {
                    "name": name,
                    "annotations": {"podsnapshot.gke.io/origin-pod": record.pod},
                },
                "spec": {"policyName": "llm-policy"},
            }
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "podsnapshots", body)
            patch = {"metadata": {"annotations": {"snapready.io/origin": record.to_json()}}}
            custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, "podsnapshots", name, patch, field_manager=manager
            )
        with make_env(control_plane, kube_admin, namespace) as env:
            converted = view_of(wait_record(env.api, namespace, "converted"))
            assert converted.converted
            assert converted.record.spec_hash == legacy.spec_hash
            assert dict(converted.record.fields) == dict(legacy.fields)
            assert converted.record.node.get("pool") == "old-pool"
            rebuilt = view_of(wait_record(env.api, namespace, "not-ours"))
            assert not rebuilt.converted and rebuilt.record.spec_hash is None  # pod is gone
            forged = view_of(wait_record(env.api, namespace, "claimed"))
            assert not forged.converted and forged.record.spec_hash != claimed.spec_hash
            blocked = view_of(wait_record(env.api, namespace, "fetching"))
            assert blocked.converted and blocked.record.spec_hash == fetching.spec_hash
            assert blocked.record.blocker == (
                "init container 'fetch' mounts emptyDir 'cache' first and has exited by the "
                "checkpoint (init-emptydir)"
            )
            assert converted.record.blocker is None  # its origin pod is gone: not known
            assert env.source.origins.actions["converted"] == 2
            view = env.source.state().snapshots.named(namespace, "converted")
            assert view is not None and view.legacy  # the annotation stays; never written
    finally:
        gke.close()  # type: ignore[no-untyped-call]


def _editor(
    control_plane: ControlPlane, api: client.ApiClient, namespace: str, path: Path
) -> client.CustomObjectsApi:
    """A namespace user bound to the built-in ``edit`` ClusterRole."""
    token = service_account_token(api, namespace, "editor")
    kubeconfig = control_plane.token_kubeconfig(path, token, namespace=namespace, user="editor")
    binding = {
        "metadata": {"name": "editor-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "editor", "namespace": namespace}],
    }
    client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(
        namespace, client.V1RoleBinding.model_validate(binding)
    )
    return client.CustomObjectsApi(ControlPlane.client_from_kubeconfig(kubeconfig))


def test_an_edit_user_reads_records_but_can_neither_write_nor_forge_one(
    env: Env, control_plane: ControlPlane, tmp_path: Path
) -> None:
    take_snapshot(env)
    record = wait_record(env.api, env.namespace, "snap-1")
    editor = _editor(control_plane, env.api, env.namespace, tmp_path / "editor.kubeconfig")

    def can_list() -> list[Any] | None:
        try:
            listed = editor.list_namespaced_custom_object(*RECORDS[:2], env.namespace, RECORDS[2])
        except ApiException as error:
            if error.status == 403:
                return None  # the binding and the aggregation reach the authorizer soon
            raise
        return list(cast("dict[str, Any]", listed)["items"])

    listed = wait_for("view aggregation", can_list, 20)
    assert listed is not None and [r["metadata"]["name"] for r in listed] == ["snap-1"]
    forged = {**record["spec"], "specHash": "v1:sha256:" + "00" * 32}
    # A namespace admin who was also granted patch on PodSnapshots (a custom Role): RBAC lets
    # the request through, GKE's guard refuses it (422), as on GKE.
    writer_role = {
        "metadata": {"name": "podsnapshot-writer"},
        "rules": [
            {
                "apiGroups": [GROUP],
                "resources": ["podsnapshots"],
                "verbs": ["get", "patch", "update"],
            }
        ],
    }
    rbac = client.RbacAuthorizationV1Api(env.api)
    rbac.create_namespaced_role(env.namespace, client.V1Role.model_validate(writer_role))
    writer_binding = {
        "metadata": {"name": "podsnapshot-writer"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "podsnapshot-writer",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "editor", "namespace": env.namespace}],
    }
    rbac.create_namespaced_role_binding(
        env.namespace, client.V1RoleBinding.model_validate(writer_binding)
    )
    pod_snapshot_writer = editor

    def guard_answers() -> bool:
        try:
            editor.patch_namespaced_custom_object(
                GROUP, VERSION, env.namespace, "podsnapshots", "snap-1", {"metadata": {}}
            )
        except ApiException as error:
            return bool(error.status == 422)  # past RBAC, refused by GKE's guard
        return False

    wait_for("the writer Role in effect", guard_answers, timeout=20)
    attempts: dict[str, Callable[[], object]] = {
        "create": lambda: editor.create_namespaced_custom_object(
            *RECORDS[:2],
            env.namespace,
            RECORDS[2],
            {
                "apiVersion": "snapready.io/v1alpha1",
                "kind": "SnapshotRecord",
                "metadata": {"name": "forged"},
                "spec": forged,
            },
        ),
        "patch": lambda: editor.patch_namespaced_custom_object(
            *RECORDS[:2], env.namespace, RECORDS[2], "snap-1", {"spec": forged}
        ),
        "delete": lambda: editor.delete_namespaced_custom_object(
            *RECORDS[:2], env.namespace, RECORDS[2], "snap-1"
        ),
        "patch the PodSnapshot": lambda: pod_snapshot_writer.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            env.namespace,
            "podsnapshots",
            "snap-1",
            {"metadata": {"annotations": {"podsnapshot.gke.io/origin-pod": "other"}}},
        ),
    }
    for what, attempt in attempts.items():
        with pytest.raises(ApiException) as refused:
            attempt()
        expected = 422 if what == "patch the PodSnapshot" else 403  # guard / RBAC
        assert refused.value.status == expected, (what, refused.value.body)
    [only] = records_in(env.api, env.namespace)
    assert only["spec"] == record["spec"]
    twin = env.annotations(env.pod("twin"))
    assert twin["snapready.io/restore-prediction"] == "hit"


def test_a_tenants_forged_snapready_keys_do_not_survive_on_a_new_pod(env: Env) -> None:
    """On a pod predicted ``none`` (no snapshot yet), a tenant's ``restore-snapshot`` and
    ``origin`` annotations are removed at admission; snapready's own prediction stands."""
    pod = env.pod(
        "forger",
        annotations={
            "snapready.io/restore-snapshot": "snap-of-someone-else",
            "snapready.io/restore-prediction": "hit",
            "snapready.io/origin": "{}",
        },
    )
    annotations = env.annotations(pod)
    assert annotations["snapready.io/restore-prediction"] == "none"
    assert "snapready.io/restore-snapshot" not in annotations
    assert "snapready.io/origin" not in annotations


def test_an_origin_pod_changed_in_place_is_recorded_with_an_unknown_fingerprint(
    env: Env,
) -> None:
    """A tenant patches the running origin pod's image before snapready writes the record (a
    late record: a hand-over, an upgrade): the live pod no longer has the fingerprint admission
    stamped on it, so what it was at the checkpoint is unknown; no pod predicts ``hit`` from
    today's spec, neither the new image nor the old."""
    pod = env.pod("origin")
    admitted = jsonpatch.apply_patch(pod, list(env.mutate(pod).patch))
    admitted["spec"]["nodeName"] = env.node
    core = client.CoreV1Api(env.api)
    core.create_namespaced_pod(env.namespace, client.V1Pod.model_validate(admitted))
    image = "registry.example/llm@sha256:" + "cd" * 32
    core.patch_namespaced_pod(
        "origin",
        env.namespace,
        {"spec": {"containers": [{"name": "server", "image": image}]}},
    )
    gke = client.CustomObjectsApi(env.gke)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodSnapshot",
        "metadata": {"name": "late", "annotations": {"podsnapshot.gke.io/origin-pod": "origin"}},
        "spec": {"policyName": "llm-policy"},
    }
    gke.create_namespaced_custom_object(GROUP, VERSION, env.namespace, "podsnapshots", body)
    ready = {"type": "Ready", "status": "True", "reason": "AllSnapshotsAvailable"}
    ready |= {"lastTransitionTime": "2026-12-01T10:00:00Z", "message": ""}
    gke.patch_namespaced_custom_object_status(
        GROUP, VERSION, env.namespace, "podsnapshots", "late", {"status": {"conditions": [ready]}}
    )
    record = view_of(wait_record(env.api, env.namespace, "late")).record
    assert record.pod == "origin" and record.spec_hash is None and not record.fields
    wait_cached(env, "late")
    for name, changes in (("new", {"container": {"image": image}}), ("old", {})):
        annotations = env.annotations(env.pod(name, **changes))
        assert annotations["snapready.io/restore-prediction"] != "hit", name


def test_records_beyond_the_crd_bounds_are_accepted_as_unknown(env: Env) -> None:
    """What snapready builds always fits the CRD: an absurd ownerReference (a tenant's, 300
    characters) or 9,000 field digests become unknown instead of a 422 the leader would never
    retry."""
    from webhook.snapshots.records import record_object  # noqa: PLC0415
    from webhook.snapshots.views import WorkloadRef  # noqa: PLC0415

    huge = OriginRecord(
        pod="p",
        spec_hash="v1:sha256:" + "ab" * 32,
        fields={f"spec.containers[{i}].image": "0123456789ab" for i in range(9000)},
        workload=WorkloadRef("K" * 300, "n" * 300, "u" * 100),
        node={"pool": "x" * 300},
    )
    view = SnapshotView(env.namespace, "bounds", "llm-policy", "p", True, "", "", uid="uid-x")
    body = record_object(huge, view, "podsnapshot.gke.io/v1", converted=False)
    del body["metadata"]["ownerReferences"]  # no such PodSnapshot: keep the GC away
    created = client.CustomObjectsApi(env.api).create_namespaced_custom_object(
        *RECORDS[:2], env.namespace, RECORDS[2], body
    )
    back = view_of(cast("dict[str, Any]", created)).record
    assert back.spec_hash == huge.spec_hash
    assert (back.workload, dict(back.fields), back.node.get("pool")) == (None, {}, None)
