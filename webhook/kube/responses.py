"""AdmissionReview response constructors (after controller-runtime's ``response.go``).

A decision is built with ``allowed``/``denied``/``patched``/``with_warnings`` and turned into the
wire document by ``finalize``, which alone sets ``apiVersion``, ``kind`` and echoes ``uid``, so
no path can forget them.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from webhook.base.text import clip
from webhook.base.types import JsonPatchOp

MAX_WARNING_CHARS = 256
"""API server limit per warning (k8s.io/apiserver/pkg/warning: longer ones are truncated)."""
MAX_WARNINGS_TOTAL_CHARS = 4096
"""API server limit for all warnings of one response together."""
HTTP_BAD_REQUEST = 400
HTTP_FORBIDDEN = 403
HTTP_INTERNAL_ERROR = 500
STATUS_REASONS = {
    HTTP_BAD_REQUEST: "BadRequest",
    HTTP_FORBIDDEN: "Forbidden",
    HTTP_INTERNAL_ERROR: "InternalError",
}
"""``metav1.StatusReason`` for the codes snapready answers with (k8s.io/apimachinery types.go)."""


@dataclass(frozen=True)
class Decision:
    """What the webhook decided, before it is put on the wire.

    Attributes:
        allowed: admit or deny.
        message: denial reason shown to the user (``status.message``).
        code: HTTP-like status code for denials (403 policy denial, 500 internal error).
        patch: RFC 6902 operations (mutating only); empty means no patch.
        warnings: ``response.warnings`` lines, already bounded by ``bounded_warnings``.
        audit: free-form facts for logs/metrics (never sent on the wire).
    """

    allowed: bool
    message: str | None = None
    code: int | None = None
    patch: tuple[JsonPatchOp, ...] = ()
    warnings: tuple[str, ...] = ()
    audit: dict[str, Any] = field(default_factory=dict)


def allowed(*, warnings: tuple[str, ...] = ()) -> Decision:
    """Admit without a patch."""
    return Decision(allowed=True, warnings=warnings)


def denied(message: str, *, code: int = HTTP_FORBIDDEN, warnings: tuple[str, ...] = ()) -> Decision:
    """Deny with a user-facing ``message`` (what to change)."""
    return Decision(allowed=False, message=message, code=code, warnings=warnings)


def patched(patch: list[JsonPatchOp], *, warnings: tuple[str, ...] = ()) -> Decision:
    """Admit with a JSON Patch; an empty ``patch`` is the same as ``allowed``."""
    return Decision(allowed=True, patch=tuple(patch), warnings=warnings)


def with_warnings(decision: Decision, extra: list[str]) -> Decision:
    """Return ``decision`` with ``extra`` warnings appended (still within the API limits)."""
    return replace(decision, warnings=bounded_warnings([*decision.warnings, *extra]))


def bounded_warnings(lines: list[str]) -> tuple[str, ...]:
    """Clip each warning to 256 chars and the total to 4096 (API server limits).

    When lines are dropped, the last kept line says how many were left out.
    """
    kept = bounded_lines(
        lines,
        more="warning(s) (see the webhook logs)",
        line_chars=MAX_WARNING_CHARS,
        total_chars=MAX_WARNINGS_TOTAL_CHARS,
    )
    return tuple(kept)


MAX_MESSAGE_LINE_CHARS = 512
"""Longest line of a denial message: a finding that lists thousands of values (an affinity
``In`` with 5000 instance types) stays readable."""
MAX_MESSAGE_CHARS = 4096
"""Longest list part of a denial message. ``status.message`` has no API limit, but kubectl and
the controllers' events print it whole; like warnings (4096 in total), it must stay readable."""


def bounded_lines(
    lines: list[str],
    *,
    more: str,
    line_chars: int = MAX_MESSAGE_LINE_CHARS,
    total_chars: int = MAX_MESSAGE_CHARS,
) -> list[str]:
    """``lines`` each clipped to ``line_chars``, as many as fit in ``total_chars`` (64 kept for
    the last line); when some are left out, a last line ``... and N more <more>``."""
    kept: list[str] = []
    total = 0
    for index, line in enumerate(lines):
        text = clip(line, line_chars)
        if total + len(text) > total_chars - 64:
            kept.append(f"... and {len(lines) - index} more {more}")
            break
        kept.append(text)
        total += len(text) + 1
    return kept


def malformed_review(message: str, *, uid: str, api_version: str) -> dict[str, Any]:
    """The AdmissionReview answering a review that is malformed but whose ``request.uid`` could
    be read: a 400 denial ``malformed AdmissionReview: <message>`` (the HTTP edge and
    ``snapready review`` answer alike)."""
    decision = denied(f"malformed AdmissionReview: {message}", code=HTTP_BAD_REQUEST)
    return finalize(decision, uid=uid, api_version=api_version)


def finalize(decision: Decision, *, uid: str, api_version: str) -> dict[str, Any]:
    """The wire AdmissionReview for ``decision``: same ``apiVersion`` as the request, uid echoed.

    ``patch``/``patchType`` appear only when there is a non-empty patch.
    """
    response: dict[str, Any] = {"uid": uid, "allowed": decision.allowed}
    if not decision.allowed:
        response["status"] = {
            "code": decision.code or HTTP_FORBIDDEN,
            "message": decision.message or "denied",
            "reason": STATUS_REASONS.get(decision.code or HTTP_FORBIDDEN, "InternalError"),
        }
    if decision.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(list(decision.patch))).decode("ascii")
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}
