"""Structured JSON logs: the formatter, the per-admission line and object redaction.

One JSON object per line on stderr. Each answered review logs one ``admission`` line holding
identifiers only (uid, namespace, kind, name, operation, policy, decision, rule ids, duration):
never the object body, env values or tokens. At debug level a *redacted* copy of the object may
follow (env values, secret-looking keys/annotations/args, ``last-applied-configuration`` and
Secret/ConfigMap data removed, depth/size bounded).
"""

from __future__ import annotations

import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

from webhook.responses import Decision
from webhook.review import AdmissionReviewRequest
from webhook.types import Endpoint, Finding

log = logging.getLogger("snapready.admission")

REDACTED = "<redacted>"
MAX_FIELD_CHARS = 253
"""Longest identifier we log: a DNS subdomain name (Kubernetes object names) is at most 253."""
MAX_DEPTH = 24
MAX_ITEMS = 128
MAX_STRING = 512
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SECRET_KEY = re.compile(
    r"passw|secret|token|credential|api[-_]?key|private[-_]?key|auth|bearer|session", re.I
)
SECRET_ASSIGNMENT = re.compile(
    r"(passw|secret|token|credential|api[-_]?key|private[-_]?key|bearer)\S*[=:\s]\s*\S", re.I
)
TOKEN_VALUE = re.compile(r"^(eyJ[\w-]+\.[\w-]+|[A-Za-z0-9+/_=-]{32,})")
"""A JWT, or 32+ chars of base64/hex without spaces: treat as a credential."""
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    """Format records as one JSON object: ``time``, ``level``, ``logger``, ``msg`` plus extras.

    Extra attributes passed with ``extra={...}`` become top-level keys, and so do the items of an
    ``extra={"fields": {...}}`` dict (for keys LogRecord reserves, such as ``name``); exceptions
    become ``exc``.
    """

    _second: int = -1
    _stamp: str = ""

    def format(self, record: logging.LogRecord) -> str:
        """One line of JSON (non-JSON values fall back to ``str``)."""
        entry: dict[str, Any] = {
            "time": self._time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        extras = record.__dict__.keys() - _STANDARD  # a set operation: cheap on the hot path
        for key in extras:
            if not key.startswith("_"):
                entry[key] = record.__dict__[key]
        fields = entry.pop("fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()

    def _time(self, created: float) -> str:
        """ISO 8601 UTC with milliseconds; the part up to the second is cached."""
        second = int(created)
        if second != self._second:
            self._second = second
            self._stamp = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return f"{self._stamp}.{int((created - second) * 1000):03d}Z"


def configure(level: str = "info") -> None:
    """Send every logger (uvicorn's too) to stderr as JSON lines at ``level``.

    Also switches off what each ``LogRecord`` would otherwise collect and we never print (caller
    frame, thread, process names): the logging HOWTO's "Optimization" advice, worth several
    microseconds per admission line.
    """
    logging._srcfile = None  # no caller lookup (findCaller)
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = AdmissionBufferingHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True


class AdmissionBufferingHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """stderr handler that writes ``admission`` info lines without a flush (one syscall each
    otherwise, ~10% of a fast-path request); ``flush_logs`` runs every 100 ms from the server's
    tick, so such a line reaches stderr at most ~0.1 s late. Every other record (start-up,
    warnings, errors, other loggers) is flushed at once, as with a plain ``StreamHandler``.
    """

    def __init__(self) -> None:
        # Our own buffered text stream on fd 2: sys.stderr is line-buffered (a write per line).
        stream = open(sys.stderr.fileno(), "w", buffering=1 << 16, closefd=False)  # noqa: SIM115
        super().__init__(stream)

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record``; flush unless it is an info-or-lower ``admission`` line."""
        try:
            self.stream.write(self.format(record) + "\n")
            if record.levelno >= logging.WARNING or record.name != log.name:
                self.flush()
        except Exception:
            self.handleError(record)


def flush_logs() -> None:
    """Flush every root handler (the server calls this on its 100 ms tick and at exit)."""
    for handler in logging.getLogger().handlers:
        handler.flush()


def decision_label(decision: Decision) -> str:
    """``error`` (internal error), ``denied``, ``patched`` or ``allowed``."""
    if "internal_error" in decision.audit:
        return "error"
    if not decision.allowed:
        return "denied"
    return "patched" if decision.patch else "allowed"


def _text(value: Any) -> str | None:
    """``value`` as a bounded identifier, or None when it is not a string."""
    return value[:MAX_FIELD_CHARS] if isinstance(value, str) else None


def admission_fields(
    endpoint: Endpoint, review: AdmissionReviewRequest, decision: Decision, seconds: float
) -> dict[str, Any]:
    """The identifying fields of one admission (no object content beyond names)."""
    request = review.request
    obj = request.object if isinstance(request.object, dict) else None
    if obj is None and isinstance(request.old_object, dict):
        obj = request.old_object
    metadata = obj.get("metadata") if obj is not None else None
    metadata = metadata if isinstance(metadata, dict) else {}
    audit = decision.audit
    findings = audit.get("findings") or ()
    fields: dict[str, Any] = {
        "uid": _text(request.uid),
        "endpoint": endpoint,
        "namespace": _text(request.namespace) or _text(metadata.get("namespace")),
        "kind": _text(request.kind.kind),
        "name": _text(request.name) or _text(metadata.get("name")),
        "operation": request.operation,
        "decision": decision_label(decision),
        "rules": sorted({f.rule for f in findings if isinstance(f, Finding)}),
        "durationMs": round(seconds * 1000, 3),
    }
    if not fields["name"]:
        fields["generateName"] = _text(metadata.get("generateName"))
    optional = {
        "subResource": _text(request.sub_resource),
        "dryRun": request.dry_run or None,
        "policy": _text(audit.get("policy")) or None,
        "mode": _text(audit.get("mode")),
        "mutators": audit.get("mutators") or None,
        "patchOps": len(decision.patch) or None,
        "warnings": len(decision.warnings) or None,
        "code": decision.code if not decision.allowed else None,
        "internalError": audit.get("internal_error"),
    }
    fields.update({key: value for key, value in optional.items() if value is not None})
    return fields


def log_admission(
    endpoint: Endpoint, review: AdmissionReviewRequest, decision: Decision, seconds: float
) -> None:
    """Log the ``admission`` line (info) and, at debug, the redacted object."""
    if not log.isEnabledFor(logging.INFO):
        return
    log.info("admission", extra={"fields": admission_fields(endpoint, review, decision, seconds)})
    if log.isEnabledFor(logging.DEBUG) and review.request.object is not None:
        log.debug(
            "admission object",
            extra={"uid": _text(review.request.uid), "object": redact(review.request.object)},
        )


def redact(value: Any, depth: int = 0, key: str = "") -> Any:
    """A bounded copy of ``value`` safe to log.

    Removes: ``env[].value``, Secret/ConfigMap ``data``/``stringData``/``binaryData``, annotation
    ``last-applied-configuration`` and annotations whose key or value looks like a credential,
    string values under secret-looking keys, ``command``/``args`` items that carry a credential.
    Bounds: depth 24, 128 items per list/dict, 512 chars per string.
    """
    if depth > MAX_DEPTH:
        return "<too deep>"
    if key == "env" and not isinstance(value, list):
        return REDACTED  # env is a list of {name, value}; anything else is not worth the risk
    if isinstance(value, dict):
        return _redact_dict(value, depth, key)
    if isinstance(value, list):
        items = [_redact_item(item, depth, key) for item in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"<{len(value) - MAX_ITEMS} more>")
        return items
    if isinstance(value, str):
        if SECRET_KEY.search(key) or TOKEN_VALUE.match(value):
            return REDACTED
        return value if len(value) <= MAX_STRING else value[:MAX_STRING] + "..."
    return value


def _redact_item(item: Any, depth: int, key: str) -> Any:
    if key == "env" and isinstance(item, dict):
        return {k: (REDACTED if k == "value" else redact(v, depth + 1, k)) for k, v in item.items()}
    if key in ("command", "args") and isinstance(item, str) and SECRET_ASSIGNMENT.search(item):
        return REDACTED
    return redact(item, depth + 1, key)


def _redact_dict(value: dict[Any, Any], depth: int, key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for index, (raw_name, item) in enumerate(value.items()):
        if index >= MAX_ITEMS:
            out["<more>"] = len(value) - MAX_ITEMS
            break
        name = str(raw_name)
        if depth == 0 and name in ("data", "stringData", "binaryData"):
            continue
        if key == "annotations" and _secret_annotation(name, item):
            continue
        out[name] = redact(item, depth + 1, name)
    return out


def _secret_annotation(name: str, value: Any) -> bool:
    if name == LAST_APPLIED or SECRET_KEY.search(name):
        return True
    return isinstance(value, str) and bool(
        TOKEN_VALUE.match(value) or SECRET_ASSIGNMENT.search(value)
    )
