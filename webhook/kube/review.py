"""The AdmissionReview envelope (``admission.k8s.io/v1`` and ``v1beta1``), parsed at the edge only.

``request.object`` and ``request.oldObject`` stay the raw JSON dicts from the body: re-serialising
them through typed models would drop fields the model does not know (native sidecar
``restartPolicy``, ``resizePolicy``...). Reference: k8s.io/api/admission/v1 types.go.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from webhook.base.errors import BadRequest

ADMISSION_API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
MAX_UID_CHARS = 128
"""Longest ``request.uid`` accepted. The API server sends a UUID (36 characters; k8s.io/apiserver
admission ``AdmissionRequest.UID``); the uid is echoed in the answer, so an unbounded one would
let a client grow every answer, and the memory of answers it never reads."""


class GroupVersionKind(BaseModel):
    """``request.kind`` / ``requestKind``: ``{"group": "", "version": "v1", "kind": "Pod"}``."""

    model_config = ConfigDict(extra="ignore")
    group: str = ""
    version: str = ""
    kind: str = ""


class GroupVersionResource(BaseModel):
    """``request.resource``: ``{"group": "", "version": "v1", "resource": "pods"}``."""

    model_config = ConfigDict(extra="ignore")
    group: str = ""
    version: str = ""
    resource: str = ""


class AdmissionRequest(BaseModel):
    """``AdmissionReview.request``; ``object``/``old_object`` are untouched raw dicts (or None)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    uid: str = Field(min_length=1, max_length=MAX_UID_CHARS)
    kind: GroupVersionKind
    resource: GroupVersionResource = GroupVersionResource()
    sub_resource: str | None = Field(None, alias="subResource")
    name: str | None = None
    namespace: str | None = None
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    object: Any = None
    old_object: Any = Field(None, alias="oldObject")
    dry_run: bool | None = Field(None, alias="dryRun")
    user_info: Any = Field(None, alias="userInfo")
    """``request.userInfo`` as sent (raw): who made the request (``username``, ``groups``)."""

    @property
    def username(self) -> str | None:
        """``userInfo.username``, or None when absent or not a string."""
        info = self.user_info
        name = info.get("username") if isinstance(info, dict) else None
        return name if isinstance(name, str) else None


class AdmissionReviewRequest(BaseModel):
    """The whole review the API server POSTs."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    api_version: Literal["admission.k8s.io/v1", "admission.k8s.io/v1beta1"] = Field(
        alias="apiVersion"
    )
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


def _uid_of(document: Any) -> str | None:
    request = document.get("request") if isinstance(document, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) and 0 < len(uid) <= MAX_UID_CHARS else None


def _api_version_of(document: Any) -> str:
    version = document.get("apiVersion") if isinstance(document, dict) else None
    return version if version in ADMISSION_API_VERSIONS else ADMISSION_API_VERSIONS[0]


def parse_review(body: bytes) -> AdmissionReviewRequest:
    """Decode and validate an AdmissionReview body.

    Args:
        body: raw request bytes (UTF-8 JSON).

    Returns:
        The typed envelope; ``request.object`` is the raw dict from ``body``.

    Raises:
        BadRequest: not JSON, not UTF-8, nested too deep, not an AdmissionReview, missing
            ``request``/``request.uid``, or a CREATE/UPDATE without ``request.object``
            (``AdmissionRequest.object`` is set for both: k8s.io/api admission/v1 types.go);
            ``uid`` is set when it could be read.
    """
    if not body:
        raise BadRequest("empty body: expected an AdmissionReview JSON document")
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise BadRequest("body is not a JSON object: expected an AdmissionReview")
    try:
        review = AdmissionReviewRequest.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(root)"
        raise BadRequest(
            f"not a valid AdmissionReview: {where}: {first['msg']}", uid=_uid_of(document)
        ) from None
    object_ = review.request.object
    if object_ is None:
        # DELETE carries none (CONNECT its options); CREATE and UPDATE always carry theirs.
        if review.request.operation in ("CREATE", "UPDATE"):
            raise BadRequest(
                f"request.object is required for {review.request.operation}",
                uid=review.request.uid,
            )
    elif not isinstance(object_, dict):
        raise BadRequest("request.object must be a JSON object", uid=review.request.uid)
    return review


def api_version_hint(body: bytes) -> str:
    """Best-effort ``apiVersion`` of a body that failed to parse, for error reviews."""
    try:
        return _api_version_of(orjson.loads(body))
    except orjson.JSONDecodeError:
        return ADMISSION_API_VERSIONS[0]
