"""Which Secrets and ConfigMaps a pod consumes, and when a snapshot is ``stale-config``."""

from __future__ import annotations

from typing import Any

from webhook.snapshots.config_refs import (
    ConfigMeta,
    config_changes,
    config_meta,
    consumed,
    refs_of,
    watched_namespaces,
)
from webhook.snapshots.views import ConfigRef, OriginRecord, SnapshotView

POD: dict[str, Any] = {
    "spec": {
        "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "init-secret"}}]}],
        "containers": [
            {
                "name": "c",
                "env": [
                    {"name": "A", "value": "plain"},
                    {"name": "T", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "t"}}},
                    {"name": "M", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "m"}}},
                    {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ],
                "envFrom": [{"configMapRef": {"name": "cfg"}}],
            }
        ],
        "ephemeralContainers": [{"name": "e", "envFrom": [{"secretRef": {"name": "debug"}}]}],
        "volumes": [
            {"name": "s", "secret": {"secretName": "tls"}},
            {"name": "c", "configMap": {"name": "files"}},
            {
                "name": "p",
                "projected": {
                    "sources": [
                        {"secret": {"name": "proj-secret"}},
                        {"configMap": {"name": "proj-cm"}},
                        {"serviceAccountToken": {"path": "token"}},
                    ]
                },
            },
            {
                "name": "kube-api-access-abcde",
                "projected": {  # as the ServiceAccount admission plugin writes it
                    "sources": [
                        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {"fieldPath": "metadata.namespace"},
                                    }
                                ]
                            }
                        },
                    ]
                },
            },
            {"name": "e", "emptyDir": {}},
        ],
        "imagePullSecrets": [{"name": "registry"}],
    }
}


def test_every_way_a_pod_reads_configuration_is_found_once() -> None:
    assert consumed(POD) == (
        ("ConfigMap", "cfg"),
        ("ConfigMap", "files"),
        ("ConfigMap", "proj-cm"),
        ("Secret", "debug"),
        ("Secret", "hf-token"),
        ("Secret", "init-secret"),
        ("Secret", "proj-secret"),
        ("Secret", "tls"),
    )


def test_a_user_volume_reading_the_root_ca_counts() -> None:
    pod = {"spec": {"volumes": [{"name": "ca", "configMap": {"name": "kube-root-ca.crt"}}]}}
    assert consumed(pod) == (("ConfigMap", "kube-root-ca.crt"),)


def test_a_configmap_projected_under_the_token_volumes_name_counts() -> None:
    """Only the API server's own token volume is skipped (``kube.token_volume``): a volume
    named like it that projects the tenant's ConfigMap is configuration the pod reads."""
    volume = {
        "name": "kube-api-access-zzzzz",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token"}},
                {"configMap": {"name": "app-settings", "items": [{"key": "a", "path": "a"}]}},
            ]
        },
    }
    assert consumed({"spec": {"volumes": [volume]}}) == (("ConfigMap", "app-settings"),)


def test_broken_shapes_are_skipped() -> None:
    pod: dict[str, Any] = {
        "spec": {
            "containers": [
                "x",
                {"env": ["y", {"valueFrom": {"secretKeyRef": "z"}}], "envFrom": [1]},
            ],
            "volumes": [3, {"secret": {"secretName": ""}}, {"projected": {"sources": ["q"]}}],
        }
    }
    assert consumed(pod) == ()
    assert consumed({}) == ()


def test_config_meta_reads_metadata_only() -> None:
    obj = {
        "metadata": {
            "resourceVersion": "42",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [
                {"manager": "a", "time": "2026-05-01T00:00:00Z", "fieldsV1": {"f:data": {}}},
                {"manager": "b", "time": "2026-06-01T00:00:00Z", "fieldsV1": {"f:data": {}}},
                {"manager": "c", "fieldsV1": {"f:data": {}}},
                # A later label edit by another manager: not a change of the values.
                {
                    "manager": "kubectl-label",
                    "time": "2026-07-01T00:00:00Z",
                    "fieldsV1": {"f:metadata": {"f:labels": {}}},
                },
            ],
        },
        "data": {"token": "c2VjcmV0"},
    }
    assert config_meta(obj) == ConfigMeta("42", "2026-06-01T00:00:00Z")
    assert config_meta({"metadata": {"resourceVersion": "1", "creationTimestamp": "T"}}) == (
        ConfigMeta("1", "T")
    )
    assert config_meta({"metadata": {}}) is None


def view(config: tuple[ConfigRef, ...] | None, checkpoint_at: str | None = None) -> SnapshotView:
    record = OriginRecord(pod="o", spec_hash="h", config=config)
    return SnapshotView(
        namespace="ns",
        name="snap",
        policy="p",
        origin_pod="o",
        ready=True,
        reason="",
        created="2026-12-01T10:00:00Z",
        origin=record,
        checkpoint_at=checkpoint_at,
    )


REFS = (
    ConfigRef("Secret", "hf-token", "10", "2026-11-01T00:00:00Z"),
    ConfigRef("ConfigMap", "cfg", None),
)


def test_unchanged_configuration_is_not_stale() -> None:
    configs = {"ns": {("Secret", "hf-token"): ConfigMeta("10", "2026-11-01T00:00:00Z")}}
    assert config_changes(view(REFS), configs) == ()


def test_changed_deleted_and_created_objects() -> None:
    configs = {
        "ns": {
            ("Secret", "hf-token"): ConfigMeta("11", "2026-12-02T08:00:00Z"),
            ("ConfigMap", "cfg"): ConfigMeta("5", "2026-12-02T09:00:00Z"),
        }
    }
    changes = config_changes(view(REFS), configs)
    assert [(c.kind, c.name, c.what, c.at) for c in changes] == [
        ("Secret", "hf-token", "changed", "2026-12-02T08:00:00Z"),
        ("ConfigMap", "cfg", "created", "2026-12-02T09:00:00Z"),
    ]
    assert changes[0].text() == "Secret hf-token changed at 2026-12-02T08:00:00Z"
    (gone,) = config_changes(view(REFS[:1]), {"ns": {}})
    assert gone.what == "deleted" and gone.text() == "Secret hf-token was deleted"


def test_a_change_between_checkpoint_and_record_counts() -> None:
    """Memory is captured at the PodSnapshot's creation (10:00), not when the upload ends."""
    late = (ConfigRef("Secret", "hf-token", "10", "2026-12-01T10:05:00Z"),)
    configs = {"ns": {("Secret", "hf-token"): ConfigMeta("10", "2026-12-01T10:05:00Z")}}
    (change,) = config_changes(view(late, checkpoint_at="2026-12-01T10:20:00Z"), configs)
    assert change.what == "changed" and change.at == "2026-12-01T10:05:00Z"
    early = (ConfigRef("Secret", "hf-token", "10", "2026-12-01T09:59:00Z"),)
    configs = {"ns": {("Secret", "hf-token"): ConfigMeta("10", "2026-12-01T09:59:00Z")}}
    assert config_changes(view(early, checkpoint_at="2026-12-01T10:20:00Z"), configs) == ()


def test_a_metadata_edit_is_not_a_change() -> None:
    """A label or annotation edit bumps the resourceVersion, not the content's change time."""
    configs = {"ns": {("Secret", "hf-token"): ConfigMeta("12", "2026-11-01T00:00:00Z")}}
    assert config_changes(view(REFS[:1]), configs) == ()
    unknown_times = (ConfigRef("Secret", "hf-token", "10", None),)
    configs = {"ns": {("Secret", "hf-token"): ConfigMeta("12", None)}}
    (change,) = config_changes(view(unknown_times), configs)  # no times: the version decides
    assert change.what == "changed"


def test_unknown_is_never_stale() -> None:
    assert config_changes(view(None), {"ns": {}}) == ()  # not recorded
    assert config_changes(view(REFS), {}) == ()  # namespace not watched (yet)


def test_refs_of_and_watched_namespaces() -> None:
    metas = {("Secret", "hf-token"): ConfigMeta("7", "T"), ("ConfigMap", "cfg"): None}
    pod = {"spec": {"containers": [POD["spec"]["containers"][0]]}}
    assert refs_of(pod, metas) == (
        ConfigRef("ConfigMap", "cfg", None, None),
        ConfigRef("Secret", "hf-token", "7", "T"),
    )
    assert watched_namespaces([view(REFS), view(None), view(())]) == frozenset({"ns"})
