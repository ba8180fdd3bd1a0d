"""Shared type aliases and protocols (base layer: imports nothing from the package).

The Kubernetes objects stay plain JSON dicts (``RawObject``) from the request body to the patch;
typed views exist only at the HTTP edge (``review``) and for settings (``config``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, overload

RawObject = dict[str, Any]
"""A Kubernetes object exactly as decoded from JSON (``{"apiVersion": ..., "metadata": ...}``)."""

Labels = Mapping[str, str]


def mapping(value: Any) -> RawObject:
    """``value`` if it is a JSON object, else ``{}`` (absent, null or a wrong type in hostile or
    partial input: readers of raw objects never crash on shape)."""
    return value if isinstance(value, dict) else {}


SHARED_MAX_ENTRIES = 16_384
"""Distinct strings ``shared`` holds at most; when full it forgets them all and starts again
(what the caches already hold stays shared). At scale (2,000 nodes, 20,000 pods, 5,000
PodSnapshots: ``make bench-scale``) the distinct repeated values are a few thousand (node names,
label values, field digests)."""
SHARED_MAX_CHARS = 256
"""Longer strings are returned as they are, never held: with ``SHARED_MAX_ENTRIES``, the table
holds at most ~6 MiB whatever the values (a label value is at most 63 characters, a key 316)."""
_SHARED: dict[str, str] = {}


@overload
def shared(value: str) -> str: ...
@overload
def shared(value: None) -> None: ...
@overload
def shared(value: str | None) -> str | None: ...
def shared(value: str | None) -> str | None:
    """One copy of ``value`` for every cache that keeps an equal string: the first equal string
    seen (while ``_SHARED`` holds it), for the strings caches keep once per object though most
    objects repeat them (namespaces, labels, policies, node names, fingerprints, field digests).
    Each decoded object brings its own copy; shared, the caches keep one for all. Measured with
    tracemalloc on 20,000 replicas of review 03's pod: ``pod_record`` kept 1,890 bytes per pod
    before, 975 after (with ``PodRecord``'s slots); on 5,000 PodSnapshots with their
    SnapshotRecords: 4,090 bytes per pair before, 2,208 after.

    Not ``sys.intern``: CPython 3.12.0 to 3.12.6 never free an interned string (gh-113993, and
    free-threaded builds make them immortal), so a tenant relabelling a selected pod again and
    again would grow the process for ever. Here the table is bounded (``SHARED_MAX_ENTRIES`` of
    at most ``SHARED_MAX_CHARS``) and a string nothing else holds goes with the next reset.
    None, ``str`` subclasses (never decoded from JSON) and long strings come back as they are.
    Thread-safe: each step is one dict operation under the GIL."""
    if type(value) is not str or len(value) > SHARED_MAX_CHARS:
        return value
    kept = _SHARED.get(value)
    if kept is not None:
        return kept
    if len(_SHARED) >= SHARED_MAX_ENTRIES:
        _SHARED.clear()
    return _SHARED.setdefault(value, value)


Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
Endpoint = Literal["mutate", "validate"]
Mode = Literal["enforce", "warn", "audit"]
"""Enforcement mode: ``enforce`` denies, ``warn`` allows with warnings, ``audit`` only logs."""
MODES: tuple[Mode, ...] = get_args(Mode)
"""The modes, as a ``<prefix>enforcement`` label or annotation must spell one."""
Severity = Literal["deny", "warn"]
"""A finding's own weight: ``deny`` findings follow the mode; ``warn`` findings are advisory."""
FailurePolicy = Literal["Fail", "Ignore"]
SnapshotScope = Literal["whole-pod", "rootfs-only"]
JsonPatchOp = dict[str, Any]
"""One RFC 6902 operation: ``{"op": "add", "path": "/metadata/annotations", "value": {...}}``."""


@dataclass(frozen=True, order=True)
class Finding:
    """One problem found by a rule.

    Attributes:
        path: field path in the submitted object, e.g. ``spec.containers[1].resources.limits``.
        rule: stable rule id from the design table, e.g. ``gpu-multi-l4``.
        message: what is wrong and what would be accepted (<= ~120 chars preferred).
        severity: ``deny`` (follows the enforcement mode) or ``warn`` (always only a warning).
    """

    path: str
    rule: str
    message: str = field(compare=True)
    severity: Severity = "deny"


@dataclass(frozen=True)
class Wording:
    """How a finding of the mutating webhook reads, and which mode judges it.

    The mutating webhook's findings (``mutation.WORDINGS``, ``rules.PREDICTION_RULES``) spoke to
    users before they were findings; their texts are kept byte for byte, so they are not the
    ``[rule] path: message`` lines of the validating webhook
    (``admission.decision.decide_findings``).

    Attributes:
        warning: the warning line; ``{message}`` stands for ``Finding.message``.
        denial: the denial message, likewise.
        pod_mode: True: judged in the pod's enforcement mode (its policies, namespace label or
            the global mode), as validating findings are; False: judged as ``enforce``, so
            ``Finding.severity`` (set from the rule's own setting, e.g. ``restore.on_miss``)
            decides alone. ``rules.modes`` overrides either.
        denial_by_prefix: (prefix, denial) pairs tried in order before ``denial``: a finding
            whose message starts with the prefix gets that denial (its fix differs; a prefix,
            so that names a user wrote further on cannot pick it).
    """

    warning: str
    denial: str
    pod_mode: bool = False
    denial_by_prefix: tuple[tuple[str, str], ...] = ()

    def warning_for(self, finding: Finding) -> str:
        """The warning line of ``finding``."""
        return self.warning.format(message=finding.message)

    def denial_for(self, finding: Finding) -> str:
        """The denial message of ``finding``."""
        for prefix, denial in self.denial_by_prefix:
            if finding.message.startswith(prefix):
                return denial.format(message=finding.message)
        return self.denial.format(message=finding.message)
