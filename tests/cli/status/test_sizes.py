"""``snapready status --sizes`` against a real API server and the real GCS emulator.

A PodSnapshotStorageConfig (bucket in fake-gcs-server, path ``clusters/envtest``), a policy
naming it, PodSnapshots in three states (Ready, checkpoint failed, not ready) made so through
the status subresource, and objects of known sizes uploaded under each snapshot's prefix
(``<path>/<namespace>/<name>/``, the default ``storage.snapshot_prefix``), plus objects that
must not count (``snap-10/`` beside ``snap-1/``, another namespace). Expected sizes are the bytes
the test uploaded. ``status`` runs as a subprocess with ``STORAGE_EMULATOR_HOST``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import service_account_token, wait_for
from tests.support.gcs_emulator import FakeGcs, create_bucket, serving_recorded, upload_object
from tests.support.kube_real import create_policy, policy, storage_config
from tests.support.ports import free_port
from webhook.cli.status.sizes import gib_text

GROUP, VERSION = "podsnapshot.gke.io", "v1"
SNAPREADY = Path(sys.executable).with_name("snapready")
READY = [{"type": "Ready", "status": "True", "reason": "AllSnapshotsAvailable", "message": ""}]
FAILED = [
    {"type": "Ready", "status": "False", "reason": "Failed", "message": "x"},
    {"type": "Checkpoint", "status": "False", "reason": "Failed", "message": "exit status 128"},
]


@dataclass
class Sized:
    """One test's namespace, storage config and bucket; ``gke`` creates PodSnapshots (GKE's
    snapshot controller: GKE's guard refuses everyone else)."""

    api: client.ApiClient
    kubeconfig: Path
    namespace: str
    config: str
    bucket: str
    gke: client.ApiClient

    def snapshot(
        self, name: str, conditions: list[dict[str, Any]] | None, observed: str | None = None
    ) -> None:
        """A PodSnapshot ``name`` with ``conditions`` (none: status left empty) and GKE's
        ``status.storageStatus.gcs.observedGCSPath`` (``observed``), as GKE."""
        custom = client.CustomObjectsApi(self.gke)
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "PodSnapshot",
            "metadata": {"name": name},
            "spec": {"policyName": "sized"},
        }
        custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, "podsnapshots", body)
        if conditions is not None or observed is not None:
            status: dict[str, Any] = {"status": {"conditions": conditions or []}}
            if observed is not None:
                status["status"]["storageStatus"] = {"gcs": {"observedGCSPath": observed}}
            custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, self.namespace, "podsnapshots", name, status
            )


@pytest.fixture
def sized(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespace: str,
    podsnapshot_crds: list[str],
    fake_gcs: FakeGcs,
) -> Iterator[Sized]:
    suffix = secrets.token_hex(3)
    config, bucket = f"sizes-{suffix}", f"snapready-sizes-{suffix}"
    create_bucket(fake_gcs, bucket)
    custom = client.CustomObjectsApi(kube_admin)
    custom.create_cluster_custom_object(
        GROUP, VERSION, "podsnapshotstorageconfigs", storage_config(config, bucket)
    )
    create_policy(kube_admin, policy("sized", namespace, {"app": "llm"}, storageConfigName=config))
    gke = control_plane.gke_client()
    try:
        yield Sized(kube_admin, control_plane.admin_kubeconfig, namespace, config, bucket, gke)
    finally:
        gke.close()  # type: ignore[no-untyped-call]
        with contextlib.suppress(ApiException):
            custom.delete_cluster_custom_object(GROUP, VERSION, "podsnapshotstorageconfigs", config)


def populate(env: Sized, gcs: FakeGcs) -> dict[str, int]:
    """Snapshots and their objects; the bytes uploaded under each snapshot's own prefix."""
    env.snapshot("snap-1", READY)
    env.snapshot("snap-10", READY)
    env.snapshot("snap-bad", FAILED)
    env.snapshot("snap-up", None)  # not ready, nothing uploaded yet
    root = f"clusters/envtest/{env.namespace}"
    uploads = {
        f"{root}/snap-1/checkpoint.img": 2048,
        f"{root}/snap-1/pages.img": 300_000,
        f"{root}/snap-1/pages_meta.img": 512,
        f"{root}/snap-10/pages.img": 123_456,
        f"{root}/snap-bad/checkpoint.img": 1000,
        f"{root}/snap-100/pages.img": 999_999,  # no such PodSnapshot
        "clusters/envtest/other-ns/snap-1/pages.img": 7777,  # another namespace's
    }
    for name, size in uploads.items():
        upload_object(gcs, env.bucket, name, secrets.token_bytes(size))
    return {
        "snap-1": 2048 + 300_000 + 512,
        "snap-10": 123_456,
        "snap-bad": 1000,
        "snap-up": 0,
    }


def status(
    env: Sized, emulator: str, *extra: str, kubeconfig: Path | None = None
) -> subprocess.CompletedProcess[str]:
    args = ["status", "--kubeconfig", str(kubeconfig or env.kubeconfig), "-n", env.namespace]
    environ = {**os.environ, "STORAGE_EMULATOR_HOST": emulator}
    return subprocess.run(
        [str(SNAPREADY), *args, *extra],
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
        check=False,
    )


def sized_json(env: Sized, emulator: str, **kw: Any) -> tuple[dict[str, Any], str]:
    result = status(env, emulator, "--sizes", "--format", "json", **kw)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


def test_sizes_per_snapshot_and_per_policy_by_state(sized: Sized, fake_gcs: FakeGcs) -> None:
    expected = populate(sized, fake_gcs)
    report, _ = sized_json(sized, fake_gcs.url)
    (entry,) = report["policies"]
    block = entry["sizes"]
    got = {s["name"]: (s["bytes"], s["state"]) for s in block["snapshots"]}
    assert got == {
        "snap-1": (expected["snap-1"], "ready"),
        "snap-10": (expected["snap-10"], "ready"),
        "snap-bad": (expected["snap-bad"], "failed"),
        "snap-up": (0, "not_ready"),
    }
    prefix = {s["name"]: s["prefix"] for s in block["snapshots"]}["snap-1"]
    assert prefix == f"clusters/envtest/{sized.namespace}/snap-1/"
    assert block["bytes"] == sum(expected.values()) and block["unknown"] == 0
    assert block["byState"] == {
        "failed": {"snapshots": 1, "bytes": 1000, "unknown": 0},
        "not_ready": {"snapshots": 1, "bytes": 0, "unknown": 0},
        "ready": {"snapshots": 2, "bytes": expected["snap-1"] + expected["snap-10"], "unknown": 0},
    }
    total = report["sizes"]
    assert total["bytes"] == sum(expected.values())
    assert total["prefixTemplate"] == "{path}/{namespace}/{name}/"
    assert report["version"] == 1 and entry["snapshots"]["ready"] == 2  # the rest unchanged


def test_sizes_text(sized: Sized, fake_gcs: FakeGcs) -> None:
    expected = populate(sized, fake_gcs)
    result = status(sized, fake_gcs.url, "--sizes")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    bucket = next(line for line in lines if line.startswith("  bucket "))
    assert bucket == "  bucket     <0.1 GiB: <0.1 GiB failed, 0 B not_ready, <0.1 GiB ready"
    where = f"gs://{sized.bucket}/clusters/envtest/{sized.namespace}"
    assert f"    snap-1 (ready) <0.1 GiB  {where}/snap-1/ (assumed layout)" in lines
    assert f"    snap-up (not_ready) 0 B  {where}/snap-up/ (assumed layout)" in lines
    assert "snapshots in buckets: <0.1 GiB" in lines
    assert "  ready: <0.1 GiB (2)" in lines
    assert sum(expected.values()) < 2**30 // 20  # why "<0.1 GiB" is right here


def test_without_sizes_no_gcs_call_and_no_sizes_key(sized: Sized) -> None:
    sized.snapshot("snap-1", READY)
    with serving_recorded({}) as gcs:
        result = status(sized, gcs.url, "--format", "json")
        before = list(gcs.requests)
        with_sizes = status(sized, gcs.url, "--format", "json", "--sizes")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert "sizes" not in report and "sizes" not in report["policies"][0]
    assert before == []
    # the control: the same endpoint is asked once --sizes is given
    assert with_sizes.returncode == 0
    assert f"/storage/v1/b/{sized.bucket}/o" in gcs.requests
    assert all(path.startswith(f"/storage/v1/b/{sized.bucket}") for path in gcs.requests)


def test_unreachable_gcs_prints_unknown_with_a_note(sized: Sized, fake_gcs: FakeGcs) -> None:
    populate(sized, fake_gcs)
    dead = f"http://127.0.0.1:{free_port()}"
    report, stderr = sized_json(sized, dead)
    block = report["policies"][0]["sizes"]
    assert [s["bytes"] for s in block["snapshots"]] == [None] * 4
    assert block["bytes"] is None and block["unknown"] == 4
    assert block["byState"]["ready"] == {"snapshots": 2, "bytes": None, "unknown": 2}
    assert "cannot read the size of 4 snapshot(s) in gs://" in stderr
    assert report["policies"][0]["snapshots"]["total"] == 4  # everything else still there
    text = status(sized, dead, "--sizes")
    assert text.returncode == 0
    assert "  bucket     unknown (4 unknown)" in text.stdout
    assert "snap-1 (ready) unknown (ConnectionError" in text.stdout


def test_missing_bucket_is_unknown_and_empty_ready_snapshot_is_named(
    sized: Sized, fake_gcs: FakeGcs, kube_admin: client.ApiClient
) -> None:
    sized.snapshot("snap-1", READY)
    custom = client.CustomObjectsApi(kube_admin)
    patch = {"spec": {"snapshotStorageConfig": {"gcs": {"bucket": "absent-bucket-zz"}}}}
    custom.patch_cluster_custom_object(
        GROUP, VERSION, "podsnapshotstorageconfigs", sized.config, patch
    )
    report, stderr = sized_json(sized, fake_gcs.url)
    (snap,) = report["policies"][0]["sizes"]["snapshots"]
    assert (snap["bytes"], snap["error"]) == (None, "bucket absent-bucket-zz not found")
    assert snap["prefix"] == f"clusters/envtest/{sized.namespace}/snap-1/"
    assert "bucket absent-bucket-zz not found: shown as unknown" in stderr

    custom.patch_cluster_custom_object(  # back to the real bucket, snap-1 has no object
        GROUP,
        VERSION,
        "podsnapshotstorageconfigs",
        sized.config,
        {"spec": {"snapshotStorageConfig": {"gcs": {"bucket": sized.bucket}}}},
    )
    report, stderr = sized_json(sized, fake_gcs.url)
    (snap,) = report["policies"][0]["sizes"]["snapshots"]
    assert (snap["bytes"], snap["objects"], snap["error"]) == (0, 0, None)
    assert "1 Ready snapshot(s) have no object under their prefix" in stderr


def test_a_user_who_may_not_list_storage_configs_gets_unknown_sizes(
    sized: Sized, fake_gcs: FakeGcs, control_plane: ControlPlane, tmp_path: Path
) -> None:
    populate(sized, fake_gcs)
    token = service_account_token(sized.api, sized.namespace, "reader")
    rules = [
        {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list"]},
        {
            "apiGroups": [GROUP],
            "resources": ["podsnapshots", "podsnapshotpolicies"],
            "verbs": ["get", "list"],
        },
    ]
    rbac = client.RbacAuthorizationV1Api(sized.api)
    role = {"metadata": {"name": "reader"}, "rules": rules}
    rbac.create_namespaced_role(sized.namespace, client.V1Role.model_validate(role))
    binding = {
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": sized.namespace}],
    }
    rbac.create_namespaced_role_binding(
        sized.namespace, client.V1RoleBinding.model_validate(binding)
    )
    kubeconfig = control_plane.token_kubeconfig(tmp_path / "reader.kubeconfig", token)
    wait_for(
        "the reader's role is in force",
        lambda: status(sized, fake_gcs.url, kubeconfig=kubeconfig).returncode == 0,
        timeout=15,
    )
    report, stderr = sized_json(sized, fake_gcs.url, kubeconfig=kubeconfig)
    block = report["policies"][0]["sizes"]
    assert [s["error"] for s in block["snapshots"]] == ["storage configs not readable"] * 4
    assert block["bytes"] is None
    assert "cannot list podsnapshotstorageconfigs" in stderr
    assert report["policies"][0]["snapshots"]["total"] == 4


@pytest.mark.parametrize(
    ("size", "text"),
    [
        pytest.param(None, "unknown", id="unknown-is-never-zero"),
        pytest.param(0, "0 B", id="nothing-stored"),
        pytest.param(1, "<0.1 GiB", id="a-byte-is-not-zero-gib"),
        pytest.param(107_374_183, "0.1 GiB", id="a-tenth"),
        pytest.param(20 * 2**30, "20.0 GiB", id="an-8b-model"),
        pytest.param(73_014_444_032, "68.0 GiB", id="a-31b-model"),
        pytest.param(1_649_267_441, "1.5 GiB", id="one-and-a-half"),
    ],
)
def test_gib_text(size: int | None, text: str) -> None:
    assert gib_text(size) == text


def test_sizes_come_from_the_path_gke_reports(sized: Sized, fake_gcs: FakeGcs) -> None:
    """Issue 31 deliverable 6: where GKE reports ``observedGCSPath`` (a layout unlike the
    assumed template: another bucket, another folder), the snapshot's objects are counted
    there, marked ``observed``; the template is the marked fallback for the others."""
    other = f"gke-own-{secrets.token_hex(3)}"
    create_bucket(fake_gcs, other)
    sized.snapshot("snap-gke", READY, observed=f"gs://{other}/ps/{sized.namespace}/uid-123")
    sized.snapshot("snap-old", READY)
    uploads = {
        (other, f"ps/{sized.namespace}/uid-123/checkpoint.img"): 4096,
        (other, f"ps/{sized.namespace}/uid-123/pages.img"): 65_536,
        (other, f"ps/{sized.namespace}/uid-123/pages_meta.img"): 128,
        (other, f"ps/{sized.namespace}/uid-1234/pages.img"): 5_000,  # another snapshot's
        # What the assumed template would have counted for snap-gke: nothing of GKE's.
        (sized.bucket, f"clusters/envtest/{sized.namespace}/snap-gke/pages.img"): 77,
        (sized.bucket, f"clusters/envtest/{sized.namespace}/snap-old/pages.img"): 1_000,
    }
    for (bucket, name), size in uploads.items():
        upload_object(fake_gcs, bucket, name, secrets.token_bytes(size))
    report, _ = sized_json(sized, fake_gcs.url)
    [entry] = report["policies"]
    found = {s["name"]: s for s in entry["sizes"]["snapshots"]}
    gke = found["snap-gke"]
    assert (gke["bucket"], gke["prefix"], gke["source"]) == (
        other,
        f"ps/{sized.namespace}/uid-123/",
        "observed",
    )
    assert (gke["bytes"], gke["objects"]) == (4096 + 65_536 + 128, 3)
    old = found["snap-old"]
    assert (old["bucket"], old["source"], old["bytes"]) == (sized.bucket, "assumed", 1_000)
