"""The origin-record keys (``kube.signing.Keyring``) from a mounted Secret or from the API.

In a cluster the chart mounts the Secret ``<release>-origin-keys`` (snapready's namespace) at
``origin.keys_dir``: the kubelet writes one file per data key (symlinks into ``..data``), the
file name is the key id. ``snapready status`` and ``explain`` read the same Secret through the
API (``origin.key_secret``) when the user may. Key bytes are never logged.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from webhook.base.errors import ConfigError
from webhook.base.tracking import OriginSettings
from webhook.kube.signing import Keyring


def _keyring(
    keys: dict[str, bytes], active: str, where: str, *, verify_only: bool = False
) -> Keyring:
    if not active and (len(keys) == 1 or verify_only):
        active = min(keys, default="")  # verifying needs every key, signing one
    if not active:
        raise ConfigError(f"{where}: {len(keys)} keys and no origin.active_key to sign with")
    try:
        return Keyring(keys, active)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def load_keyring(settings: OriginSettings) -> Keyring | None:
    """The keyring of ``settings.keys_dir`` (each regular file not starting with ``.`` is a
    key; one trailing newline is dropped); None when ``keys_dir`` is empty.

    Raises:
        ConfigError: the directory cannot be read, holds no key, or a key is invalid
            (``Keyring``): snapready does not start rather than believe unsigned records.
    """
    if not settings.keys_dir:
        return None
    folder = Path(settings.keys_dir)
    keys: dict[str, bytes] = {}
    try:
        for path in sorted(folder.iterdir()):
            if not path.name.startswith(".") and path.is_file():
                keys[path.name] = _strip(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"origin.keys_dir {folder}: {exc.strerror or exc}") from None
    return _keyring(keys, settings.active_key, f"origin.keys_dir {folder}")


def keyring_from_secret(
    secret: Mapping[str, Any], settings: OriginSettings, *, verify_only: bool = False
) -> Keyring:
    """The keyring of a Secret object read from the API (``data``: base64 values);
    ``verify_only`` (the CLI): no active key is needed (during a rotation the Secret holds
    several and the CLI's settings name none).

    Raises:
        ConfigError: no data, a value that is not base64, or an invalid key.
    """
    data = secret.get("data")
    keys: dict[str, bytes] = {}
    for key_id, encoded in (data if isinstance(data, dict) else {}).items():
        try:
            keys[str(key_id)] = _strip(base64.b64decode(str(encoded), validate=True))
        except (binascii.Error, ValueError):
            raise ConfigError(f"Secret {settings.key_secret}: {key_id} is not base64") from None
    active = settings.active_key if settings.active_key in keys or not verify_only else ""
    return _keyring(keys, active, f"Secret {settings.key_secret}", verify_only=verify_only)


def _strip(key: bytes) -> bytes:
    return key[:-2] if key.endswith(b"\r\n") else key[:-1] if key.endswith(b"\n") else key
