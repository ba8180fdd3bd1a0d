"""Structured JSON logs: the formatter, the per-admission line and object redaction.

One JSON object per line on stderr. Each answered review logs one ``admission`` line holding
identifiers only (uid, namespace, kind, name, operation, policy, decision, rule ids, duration):
never the object body, env values or tokens. At debug level a *redacted* copy of the object may
follow, redacted conservatively (see ``redact``): every place where Kubernetes objects usually
carry user secrets is replaced by ``<redacted>`` whatever its content, and any other string
that looks like a credential too; depth and size are bounded.
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
