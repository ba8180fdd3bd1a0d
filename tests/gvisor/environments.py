"""The environments the gVisor tests checkpoint and restore with (shared by both helpers' tests).

``BASE`` is the checkpointed pod's container env, ``NEW`` the restoring pod's, ``THIRD`` a second
restore's, each as containerd writes a pod's env into the OCI spec (``HOSTNAME`` first, then the
image's env, then the container's; ``webhook/mutation`` injects the ``SNAPREADY_*`` paths).
"""

from __future__ import annotations

INJECTED = [
    "SNAPREADY_SPEC_ENVIRON=/proc/gvisor/spec_environ",
    "SNAPREADY_CHECKPOINT=/proc/gvisor/checkpoint",
    "SNAPREADY_HELPERS=/snapready",
]
IMAGE = ["PATH=/usr/local/bin:/usr/bin:/bin"]

CHANGED: dict[str, bytes] = {
    "PLAIN": b"new",
    "SPACES": b"two  spaces and\ta tab",
    "QUOTES": b"it's \"double\" `tick` $HOME \\ end '",
    "EQUALS": b"a=b==c=",
    "NEWLINES": b"line 1\nline 2\n",
    "UNICODE": "naïve ☃".encode(),
    "EMPTY": b"",
    "ADDED": b"only in the restoring pod",
}
"""Names whose value changes (or appears) in the restoring pod."""

BASE = [
    "HOSTNAME=pod-a",
    *IMAGE,
    *INJECTED,
    *(f"{name}=old {name.lower()}" for name in CHANGED if name != "ADDED"),
    "DUP=old",
    "BYTES=old",
    "GONE=only in the checkpointed pod",
]

NEW = [
    "HOSTNAME=pod-b",
    *IMAGE,
    *INJECTED,
    *(f"{name}={value.decode()}" for name, value in CHANGED.items()),
    "DUP=first",
    "DUP=second",
    "my.var=not a shell name",
]
NEW_RAW = [b"BYTES=\xff\xfeok"]
"""Written raw into config.json: JSON cannot carry bytes that are not UTF-8, and runsc's Go decoder
replaces each invalid byte with U+FFFD (``encoding/json``: "invalid UTF-8 ... replaced")."""

EXPECTED_NEW: dict[str, bytes | None] = {
    **CHANGED,
    "HOSTNAME": b"pod-b",
    "DUP": b"second",
    "BYTES": "\ufffd\ufffdok".encode(),
    "GONE": b"only in the checkpointed pod",
}
"""What the app sees after the restore: new values, the last of a repeated name, U+FFFD for the
bytes gVisor never received, and a name missing from the new spec keeps its old value."""

THIRD = [*NEW, "PLAIN=third"]
EXPECTED_THIRD = {**EXPECTED_NEW, "PLAIN": b"third"}

REPORTED = sorted(EXPECTED_NEW)
"""The names the test programs report (all shell variable names)."""
