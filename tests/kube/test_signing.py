"""Signed origin records (``kube.signing``) and how ``snapshot_view`` believes them: pure."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from webhook.base.errors import ConfigError
from webhook.kube.signing import Keyring, sign, verify
from webhook.kube.snapshots import ConfigRef, OriginRecord, snapshot_view

K1, K2 = b"a" * 32, b"b" * 32
RING = Keyring({"k1": K1}, "k1")
_PARSED = OriginRecord.from_json(
    OriginRecord(pod="origin", spec_hash="v1:sha256:" + "1" * 64, group={"model": "m1"}).to_json()
)
assert _PARSED is not None
RECORD: OriginRecord = _PARSED


def snapshot(value: str | None, signature: str | None, uid: str = "uid-1") -> dict[str, Any]:
    annotations = {"podsnapshot.gke.io/origin-pod": "origin"}
    if value is not None:
        annotations["snapready.io/origin"] = value
    if signature is not None:
        annotations["snapready.io/origin-signature"] = signature
    return {
        "metadata": {"namespace": "ns", "name": "snap-1", "uid": uid, "annotations": annotations},
        "spec": {"policyName": "p"},
    }


def signed(ring: Keyring = RING, uid: str = "uid-1", value: str | None = None) -> dict[str, Any]:
    text = value if value is not None else RECORD.to_json()
    return snapshot(text, sign(ring, uid=uid, namespace="ns", name="snap-1", value=text), uid)


def view_of(obj: dict[str, Any], ring: Keyring | None = RING) -> Any:
    return snapshot_view(obj, origin_annotation="snapready.io/origin", keyring=ring)


def test_a_signed_record_is_believed_with_its_key() -> None:
    view = view_of(signed())
    assert view.origin == RECORD and view.origin_key == "k1" and view.origin_rejected is None


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("value", "mismatch"),
        ("uid", "mismatch"),
        ("unsigned", "unsigned"),
        ("key id", "unknown-key"),
        ("no colon", "unknown-key"),
        ("truncated", "mismatch"),
    ],
)
def test_anything_changed_is_not_believed(change: str, why: str) -> None:
    obj = signed()
    annotations = obj["metadata"]["annotations"]
    if change == "value":  # another image's fingerprint, the signature kept
        other = OriginRecord(pod="origin", spec_hash="v1:sha256:" + "2" * 64)
        annotations["snapready.io/origin"] = other.to_json()
    elif change == "uid":  # a valid record pasted onto another PodSnapshot
        obj["metadata"]["uid"] = "uid-2"
    elif change == "unsigned":
        del annotations["snapready.io/origin-signature"]
    elif change == "key id":
        annotations["snapready.io/origin-signature"] = (
            "k9:" + annotations["snapready.io/origin-signature"].partition(":")[2]
        )
    elif change == "no colon":
        annotations["snapready.io/origin-signature"] = "k1"
    else:
        annotations["snapready.io/origin-signature"] = annotations["snapready.io/origin-signature"][
            :-2
        ]
    view = view_of(obj)
    assert view.origin is None and view.origin_rejected == why and view.origin_key is None
    assert len(view.origin_mark) == 16
    again = view_of(copy.deepcopy(obj))
    assert again.origin_mark == view.origin_mark  # one forgery, one mark


def test_an_older_key_still_verifies_after_a_rotation() -> None:
    rotated = Keyring({"k1": K1, "k2": K2}, "k2")
    view = view_of(signed(RING), rotated)
    assert view.origin == RECORD and view.origin_key == "k1"
    assert sign(rotated, uid="u", namespace="ns", name="n", value="x").startswith("k2:")
    removed = Keyring({"k2": K2}, "k2")
    assert view_of(signed(RING), removed).origin_rejected == "unknown-key"


def test_without_a_keyring_every_readable_record_is_believed() -> None:
    view = view_of(snapshot(RECORD.to_json(), None), None)
    assert view.origin == RECORD and view.origin_rejected is None


def test_non_string_signatures_never_raise() -> None:
    for signature in (None, 3, ["k1:x"], "", ":", "k1:é"):
        assert verify(RING, signature, uid="u", namespace="n", name="s", value="v")[0] is None


def test_keyring_rules() -> None:
    with pytest.raises(ConfigError, match="at least 32"):
        Keyring({"k1": b"short"}, "k1")
    with pytest.raises(ConfigError, match="not among"):
        Keyring({"k1": K1}, "k2")
    with pytest.raises(ConfigError, match="is not"):
        Keyring({"a:b": K1}, "a:b")
    with pytest.raises(ConfigError, match="no keys"):
        Keyring({}, "k1")


def test_record_config_round_trips_and_has_no_values() -> None:
    record = OriginRecord(
        pod="p",
        spec_hash=None,
        config=(ConfigRef("Secret", "hf-token", "123", "2026-12-01T10:00:00Z"),),
    )
    parsed = OriginRecord.from_json(record.to_json())
    assert parsed is not None and parsed.config == record.config
    assert OriginRecord.from_json(RECORD.to_json()).config is None  # type: ignore[union-attr]
    assert '"config":null' in RECORD.to_json()
