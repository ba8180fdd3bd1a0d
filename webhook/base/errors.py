"""The two error families of the webhook.

- ``BadRequest``: the HTTP request or AdmissionReview envelope is broken (answered with HTTP 400/413
  and a JSON body, or with an error review when the uid is known).
- ``ObjectRejected``: the embedded object is not acceptable (a denial inside a valid review).
- ``ConfigError``: settings or policy files are invalid (raised at start-up, never on the hot path).
"""

from __future__ import annotations


class SnapreadyError(Exception):
    """Base class of every error the package raises on purpose."""


class BadRequest(SnapreadyError):
    """The request cannot be processed as an AdmissionReview.

    Attributes:
        status: HTTP status to answer with (400 malformed, 413 too large, 415 media type).
        uid: ``request.uid`` when it could be read, so an error review can echo it.
    """

    def __init__(self, message: str, *, status: int = 400, uid: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.uid = uid


class ObjectRejected(SnapreadyError):
    """The object is well-formed but must be denied (e.g. an injection name collision)."""


class ConfigError(SnapreadyError):
    """Settings or a policy file are invalid; the message names the file and the field."""
