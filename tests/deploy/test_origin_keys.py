"""The chart's origin-record keys (``originSigning``) with the real Helm engine: the Secret it
creates, the volume the pods mount, the settings the server reads, and that those settings load
a keyring the server accepts (``cluster.keys``)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.support.helm_support import Obj, by_kind, objects, one, render, settings_of
from webhook.base.errors import ConfigError
from webhook.base.tracking import OriginSettings
from webhook.cluster.keys import keyring_from_secret, load_keyring
from webhook.kube.signing import MIN_KEY_BYTES


def _keys_secret(objs: list[Obj]) -> list[Obj]:
    return [s for s in by_kind(objs, "Secret") if s["metadata"]["name"].endswith("-origin-keys")]


def test_default_install_creates_a_random_key_and_mounts_it() -> None:
    objs = objects(render(name="snapready", namespace="webhooks"))
    (secret,) = _keys_secret(objs)
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    key = base64.b64decode(secret["data"]["k1"])
    assert len(key) >= MIN_KEY_BYTES
    second = _keys_secret(objects(render(name="snapready", namespace="webhooks")))[0]
    assert second["data"]["k1"] != secret["data"]["k1"], "a fresh install gets a fresh key"
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "origin-keys"]
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "origin-keys"]
    origin = settings_of(objs)["origin"]
    assert mount["mountPath"] == origin["keys_dir"] and mount["readOnly"] is True
    assert origin["active_key"] == "k1"
    assert origin["key_secret"] == f"webhooks/{secret['metadata']['name']}"
    # What the server would load from that mount (kubelet: one file per data key).
    assert keyring_from_secret(secret, OriginSettings(**origin)).active == "k1"


def test_existing_secret_is_mounted_and_none_is_rendered() -> None:
    objs = objects(render({"originSigning": {"existingSecret": "my-keys", "activeKey": "2026"}}))
    assert _keys_secret(objs) == [] and not [
        s for s in by_kind(objs, "Secret") if s["metadata"]["name"] == "my-keys"
    ]
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "origin-keys"]
    assert volume["secret"]["secretName"] == "my-keys"
    assert settings_of(objs)["origin"]["active_key"] == "2026"


def test_signing_off_mounts_nothing_and_clears_the_settings() -> None:
    objs = objects(render({"originSigning": {"enabled": False}}))
    assert _keys_secret(objs) == []
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    assert all(v["name"] != "origin-keys" for v in pod["volumes"])
    assert settings_of(objs)["origin"]["keys_dir"] == ""


def test_a_bad_key_id_is_refused_by_the_schema() -> None:
    with pytest.raises(Exception, match="activeKey"):
        render({"originSigning": {"activeKey": "a:b"}})


def test_mounted_keys_load_like_the_kubelet_writes_them(tmp_path: Path) -> None:
    # The kubelet's layout: ..data -> timestamped dir, each key a symlink into ..data.
    stamp = tmp_path / "..2026_12_02_04_00_00.1"
    stamp.mkdir()
    (stamp / "k1").write_bytes(b"x" * 40)
    (stamp / "k2").write_bytes(b"y" * 40 + b"\n")
    (tmp_path / "..data").symlink_to(stamp.name)
    for key in ("k1", "k2"):
        (tmp_path / key).symlink_to(f"..data/{key}")
    ring = load_keyring(OriginSettings(keys_dir=str(tmp_path), active_key="k2"))
    assert ring is not None and ring.keys == {"k1": b"x" * 40, "k2": b"y" * 40}
    with pytest.raises(ConfigError, match=r"no origin\.active_key"):
        load_keyring(OriginSettings(keys_dir=str(tmp_path)))
    with pytest.raises(ConfigError, match="not among the keys"):
        load_keyring(OriginSettings(keys_dir=str(tmp_path), active_key="k3"))
    (stamp / "k1").write_bytes(b"short")
    with pytest.raises(ConfigError, match="at least 32"):
        load_keyring(OriginSettings(keys_dir=str(tmp_path), active_key="k2"))
    with pytest.raises(ConfigError, match=r"origin\.keys_dir"):
        load_keyring(OriginSettings(keys_dir=str(tmp_path / "missing")))


def test_stale_config_off_drops_the_secret_grant_and_the_feature() -> None:
    def grants_secrets(objs: list[Obj]) -> bool:
        rules = one(objs, "ClusterRole")["rules"]
        return any("secrets" in rule.get("resources", []) for rule in rules)

    on = objects(render())
    assert grants_secrets(on) and settings_of(on)["origin"]["record_config"] is True
    off = objects(render({"staleConfig": False}))
    assert not grants_secrets(off) and settings_of(off)["origin"]["record_config"] is False
    rules = one(on, "ClusterRole")["rules"]
    (rule,) = [r for r in rules if "secrets" in r.get("resources", [])]
    assert sorted(rule["verbs"]) == ["get", "list", "watch"]
