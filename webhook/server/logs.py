"""Structured JSON logs: the formatter, the handler and the per-admission line.

One JSON object per line on stderr. Each answered review logs one ``admission`` line holding
identifiers only (uid, namespace, kind, name, operation, policy, decision, rule ids, duration):
never the object body, env values or tokens. At debug level a *redacted* copy of the object may
follow (``webhook.kube.redact``): every place where Kubernetes objects usually carry user secrets is
replaced by ``<redacted>`` whatever its content, and any other string that looks like a
credential too; depth and size are bounded.
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import UTC, datetime
from typing import Any

import orjson

from webhook.base.types import Endpoint, Finding
from webhook.kube.redact import redact
from webhook.kube.responses import Decision
from webhook.kube.review import AdmissionReviewRequest

log = logging.getLogger("snapready.admission")

MAX_FIELD_CHARS = 253
"""Longest identifier we log: a DNS subdomain name (Kubernetes object names) is at most 253."""
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

    def admission_line(self, created: float, fields: dict[str, Any]) -> str:
        """The line ``format`` writes for ``log.info("admission", extra={"fields": fields})``
        created at ``created`` (Unix seconds), without building a ``LogRecord``."""
        entry: dict[str, Any] = {
            "time": self._time(created),
            "level": "info",
            "logger": log.name,
            "msg": "admission",
            **fields,
        }
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

    def write_admission(self, formatter: JsonFormatter, fields: dict[str, Any]) -> None:
        """Write one ``admission`` line (unflushed) under the handler's lock.

        Raises:
            OSError, ValueError: the stream cannot be written (the caller falls back to
                ``logging``, whose ``handleError`` reports it).
        """
        line = formatter.admission_line(time.time(), fields) + "\n"
        with self.lock:  # type: ignore[union-attr]  # created by Handler.__init__
            self.stream.write(line)


def _admission_writer() -> tuple[AdmissionBufferingHandler, JsonFormatter] | None:
    """The handler and formatter an admission line may be written to directly, or None.

    Only when ``configure`` set up logging and nothing changed it since: the root logger's one
    handler is ours with our formatter, no filters, and neither the handler nor the admission
    logger has a level, handler or filter of its own. Then ``log.info`` would write exactly
    ``JsonFormatter.admission_line``; going direct skips the ``LogRecord`` and handler dispatch,
    ~5 us of the ~7 us a line costs (py-spy: logging was 18% of an unselected-pod request).
    In any other set-up (pytest's caplog, an embedding application) lines go through ``logging``.
    """
    handlers = logging.root.handlers
    if len(handlers) != 1 or log.handlers or log.filters or not log.propagate:
        return None
    handler = handlers[0]
    formatter = handler.formatter
    if (
        type(handler) is not AdmissionBufferingHandler
        or type(formatter) is not JsonFormatter
        or handler.filters
        or handler.level > logging.INFO
    ):
        return None
    return handler, formatter


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
    # The optional fields, each only when it has a value (no dict built and filtered: this runs
    # for every review, on the event loop).
    if (sub_resource := _text(request.sub_resource)) is not None:
        fields["subResource"] = sub_resource
    if request.dry_run:
        fields["dryRun"] = True
    if audit:
        if policy := _text(audit.get("policy")):
            fields["policy"] = policy
        if (mode := _text(audit.get("mode"))) is not None:
            fields["mode"] = mode
        if mutators := audit.get("mutators"):
            fields["mutators"] = mutators
    if decision.patch:
        fields["patchOps"] = len(decision.patch)
    if decision.warnings:
        fields["warnings"] = len(decision.warnings)
    if not decision.allowed and decision.code is not None:
        fields["code"] = decision.code
    if audit:
        if (error := audit.get("internal_error")) is not None:
            fields["internalError"] = error
        if (user := _text(audit.get("user"))) is not None:
            fields["user"] = user  # who created a PodSnapshotManualTrigger
    return fields


def log_admission(
    endpoint: Endpoint, review: AdmissionReviewRequest, decision: Decision, seconds: float
) -> None:
    """Log the ``admission`` line (info) and, at debug, the redacted object."""
    if not log.isEnabledFor(logging.INFO):
        return
    _write_admission_line(admission_fields(endpoint, review, decision, seconds))
    if log.isEnabledFor(logging.DEBUG) and review.request.object is not None:
        log.debug(
            "admission object",
            extra={"uid": _text(review.request.uid), "object": redact(review.request.object)},
        )


def _write_admission_line(fields: dict[str, Any]) -> None:
    """Write the ``admission`` info line: directly when ``_admission_writer`` allows it, else
    through ``logging`` (also when the direct write fails: its ``handleError`` reports it)."""
    writer = _admission_writer()
    if writer is not None:
        try:
            writer[0].write_admission(writer[1], fields)
            return
        except (OSError, ValueError):
            pass
    log.info("admission", extra={"fields": fields})
