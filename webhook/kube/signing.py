"""Signed origin records: an HMAC that binds a record to the one PodSnapshot it was written on.

A user who may edit PodSnapshots can rewrite any annotation on them (issue 27: a forged
``<prefix>origin`` with another image's fingerprint made the next pod of that image predicted
``hit``). The leader therefore signs each record: the annotation ``<prefix>origin-signature`` is
``<key id>:<base64url HMAC-SHA256>`` over ``snapready-origin/v1``, the PodSnapshot's uid,
namespace and name, and the exact bytes of the ``<prefix>origin`` value. The uid binds the
signature to one object: a valid record copied onto another PodSnapshot, or onto a snapshot
re-created under the same name, fails. A record that fails is ignored (``SnapshotView.origin``
is None), rewritten by the leader from what it knows, and reported (``cluster.origins``).

Keys (``Keyring``): several may verify, one signs (``active``), so a key is rotated by adding the
new one, making it active (the leader then re-signs every record it verified with an older key),
and removing the old one after that. The keys live in a Secret in snapready's namespace (the
chart creates it; README "Security"). Pure module: the standard library's ``hmac`` only
(RFC 2104, ``hmac.compare_digest`` for a constant-time comparison).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Literal

from webhook.base.errors import ConfigError

DOMAIN = b"snapready-origin/v1"
"""Prefix of every signed message: a signature is valid for origin records and nothing else."""
MIN_KEY_BYTES = 32
"""Shortest key accepted: 256 bits, the size of the HMAC-SHA256 output (RFC 2104 section 3)."""
KEY_ID = re.compile(r"[A-Za-z0-9][-._A-Za-z0-9]{0,62}")
"""A key id: a Secret data key (``[-._a-zA-Z0-9]+``) of at most 63 characters, no ``:``."""

Rejection = Literal["unsigned", "unknown-key", "mismatch", "removed"]
"""Why a record is not believed (the ``reason`` of ``snapready_origin_rejected_total``): no
signature (written by hand, or by a version before signing), signed with a key this replica
does not hold (removed by a rotation), a signature that does not match the record, or (seen by
the leader only) a record snapready believed that someone removed."""
REJECTIONS: tuple[Rejection, ...] = ("unsigned", "unknown-key", "mismatch", "removed")


@dataclass(frozen=True)
class Keyring:
    """The HMAC keys of the origin records.

    Attributes:
        keys: key id -> key bytes (each at least ``MIN_KEY_BYTES``).
        active: the id of the key new signatures use; one of ``keys``.

    Raises (on construction):
        ConfigError: no keys, a key id that is not ``KEY_ID``, a short key, or ``active`` not
            among ``keys``.
    """

    keys: dict[str, bytes]
    active: str

    def __post_init__(self) -> None:
        if not self.keys:
            raise ConfigError("origin signing: no keys")
        for key_id, key in self.keys.items():
            if not KEY_ID.fullmatch(key_id):
                raise ConfigError(f"origin signing: key id {key_id[:80]!r} is not [-._A-Za-z0-9]")
            if len(key) < MIN_KEY_BYTES:
                raise ConfigError(
                    f"origin signing: key {key_id} has {len(key)} bytes, at least "
                    f"{MIN_KEY_BYTES} are needed"
                )
        if self.active not in self.keys:
            raise ConfigError(
                f"origin signing: the active key {self.active[:80]!r} is not among the keys "
                f"({', '.join(sorted(self.keys))})"
            )


def _message(uid: str, namespace: str, name: str, value: str) -> bytes:
    return b"\n".join((DOMAIN, uid.encode(), namespace.encode(), name.encode(), value.encode()))


def _mac(key: bytes, message: bytes) -> str:
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def sign(keyring: Keyring, *, uid: str, namespace: str, name: str, value: str) -> str:
    """The ``<prefix>origin-signature`` value of record ``value`` on PodSnapshot ``uid``
    (``namespace/name``): ``<active key id>:<43 base64url characters>``."""
    mac = _mac(keyring.keys[keyring.active], _message(uid, namespace, name, value))
    return f"{keyring.active}:{mac}"


def verify(
    keyring: Keyring,
    signature: object,
    *,
    uid: str,
    namespace: str,
    name: str,
    value: str,
) -> tuple[str | None, Rejection | None]:
    """``(key id, None)`` when ``signature`` signs ``value`` on this PodSnapshot, else
    ``(None, why)``. Never raises: any non-string or malformed signature is rejected."""
    if not isinstance(signature, str) or not signature:
        return None, "unsigned"
    key_id, colon, mac = signature.partition(":")
    key = keyring.keys.get(key_id) if colon else None
    if key is None:
        return None, "unknown-key"
    expected = _mac(key, _message(uid, namespace, name, value))
    if not hmac.compare_digest(expected.encode(), mac.encode("utf-8", "replace")):
        return None, "mismatch"
    return key_id, None
