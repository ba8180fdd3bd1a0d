"""Redaction of Kubernetes objects for debug logs (pure: no I/O, no logging).

``redact`` returns a bounded copy of an object that is safe to log, redacted conservatively:
every place where Kubernetes objects usually carry user secrets is replaced by ``<redacted>``
whatever its content, and any other string that ``looks_like_credential`` too; depth, items and
string length are bounded. ``webhook.server.logs`` writes the result on its ``admission object``
line.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"
MAX_DEPTH = 24
MAX_ITEMS = 128
MAX_STRING = 512
SECRET_KEY = re.compile(
    r"passw|secret|token|credential|api[-_]?key|private[-_]?key|auth|bearer|session|cookie", re.I
)
"""Field names whose string values are redacted wherever they appear."""
EVERY_ITEM = frozenset({"command", "args"})
"""Lists whose every item is replaced, length kept: container ``command``/``args`` (containers,
initContainers, ephemeralContainers) and probe/lifecycle ``exec.command`` carry flags such as
``--token X`` whose secret is a separate item that no pattern can recognise."""
NAME_VALUE_LISTS = {"env": frozenset({"value", "valueFrom"}), "httpHeaders": frozenset({"value"})}
"""``[{name, value}]`` lists: names are kept, these fields are replaced (env vars; probe and
lifecycle ``httpGet.httpHeaders``, e.g. ``Authorization: Bearer ...``)."""
OPAQUE_MAPS = frozenset({"volumeAttributes", "options", "managedFields"})
"""Maps/lists whose values are free-form (CSI ``volumeAttributes``, flexVolume ``options``) or
copies of other fields (``managedFields``): replaced whole (values) or entirely."""
SAFE_ANNOTATIONS = frozenset(
    {
        "podsnapshot.gke.io/ps-name",
        "podsnapshot.gke.io/origin-pod",
        "gke-gcsfuse/volumes",
        "kubectl.kubernetes.io/default-container",
        "cluster-autoscaler.kubernetes.io/safe-to-evict",
    }
)
"""Annotations whose values are logged (still subject to ``looks_like_credential``): the ones
this webhook's rules read. Every other annotation value is replaced."""
SAFE_ANNOTATION_PREFIXES = ("snapready.io/", "dev.gvisor.")
CREDENTIAL = re.compile(
    r"eyJ[\w-]{6,}\.[\w-]+"  # a JWT
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key id
    r"|-----BEGIN[A-Z ]*PRIVATE KEY"
    r"|\b(?:bearer|basic)\s+\S"  # an Authorization header value
    r"|://[^/\s:@]+:[^/\s@]+@"  # a URL with user:password
    r"|\b(?:gh[pousr]_|github_pat_|glpat-|xox[abprs]-|AIza|sk-)[\w-]{10,}"  # vendor tokens
    r"|(?:passw|secret|token|credential|api[-_]?key|private[-_]?key|bearer)\S*[=:\s]\s*\S"
    r"|\b[0-9a-fA-F]{32,}\b",  # a hex secret (digests and UUIDs are removed first)
    re.I,
)
NOT_SECRET = re.compile(
    r"sha256:[0-9a-f]{64}|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
)
"""Image digests and UUIDs (object uids): long hex that is an identifier, not a secret."""
OPAQUE_RUN = re.compile(r"[A-Za-z0-9+/_=-]{24,}")
"""A long base64-ish run; a credential when it mixes upper case, lower case and digits."""


def looks_like_credential(value: str) -> bool:
    """True when ``value`` holds something shaped like a secret anywhere in it (a JWT, an AWS
    key id, a PEM private key, ``Bearer ...``, ``user:pass@``, vendor token prefixes,
    ``password=...``, 32+ hex digits, or a 24+ char base64-ish run mixing cases and digits)."""
    text = NOT_SECRET.sub("", value)
    if CREDENTIAL.search(text):
        return True
    return any(_mixed(run.group()) for run in OPAQUE_RUN.finditer(text))


def _mixed(run: str) -> bool:
    upper = lower = digit = False
    for char in run:
        upper, lower, digit = (
            upper or char.isupper(),
            lower or char.islower(),
            digit or char.isdigit(),
        )
    return upper and lower and digit


def redact(value: Any, depth: int = 0, key: str = "") -> Any:
    """A bounded copy of ``value`` safe to log at debug level.

    Replaced by ``<redacted>`` whatever they contain: every item of ``command``/``args`` lists
    (length kept), ``value``/``valueFrom`` of ``env`` items and ``value`` of ``httpHeaders``
    items (names kept), annotation values except ``SAFE_ANNOTATIONS`` and the ``snapready.io/``
    and ``dev.gvisor.`` prefixes, CSI ``volumeAttributes``/flexVolume ``options`` values,
    ``managedFields``, strings under secret-looking field names, and any string for which
    ``looks_like_credential`` holds. Secret/ConfigMap ``data``/``stringData``/``binaryData``
    are left out. Bounds: depth 24, 128 items per list/dict, 512 chars per string.
    """
    if depth > MAX_DEPTH:
        return "<too deep>"
    if key == "managedFields" or _odd_shape(key, value):
        return REDACTED  # not the documented shape: not worth the risk
    if isinstance(value, dict):
        return _redact_dict(value, depth, key)
    if isinstance(value, list):
        items = [_redact_item(item, depth, key) for item in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"<{len(value) - MAX_ITEMS} more>")
        return items
    if isinstance(value, str):
        if key in EVERY_ITEM or SECRET_KEY.search(key) or looks_like_credential(value):
            return REDACTED
        return value if len(value) <= MAX_STRING else value[:MAX_STRING] + "..."
    return value


def _odd_shape(key: str, value: Any) -> bool:
    """An env/httpHeaders field that is not a list, or annotations that are not a map."""
    if key in NAME_VALUE_LISTS:
        return not isinstance(value, list)
    return key == "annotations" and not isinstance(value, dict)


def _redact_item(item: Any, depth: int, key: str) -> Any:
    if key in EVERY_ITEM:
        return REDACTED
    hidden = NAME_VALUE_LISTS.get(key)
    if hidden is None:
        return redact(item, depth + 1, key)
    if not isinstance(item, dict):
        return REDACTED
    return {k: (REDACTED if k in hidden else redact(v, depth + 1, k)) for k, v in item.items()}


def _redact_dict(value: dict[Any, Any], depth: int, key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for index, (raw_name, item) in enumerate(value.items()):
        if index >= MAX_ITEMS:
            out["<more>"] = len(value) - MAX_ITEMS
            break
        name = str(raw_name)
        if depth == 0 and name in ("data", "stringData", "binaryData"):
            continue
        if key in OPAQUE_MAPS or (key == "annotations" and not _safe_annotation(name)):
            out[name] = REDACTED
            continue
        out[name] = redact(item, depth + 1, name)
    return out


def _safe_annotation(name: str) -> bool:
    return name in SAFE_ANNOTATIONS or name.startswith(SAFE_ANNOTATION_PREFIXES)
